"""Sessions and their cards, as the engine runs them.

``commands`` answers the phone's commands about sessions and the errands they start; ``rules``
holds the small rules (titles, the wire view of a record, folder paths); ``agent_events`` records
and publishes what the agents report; ``broker`` turns a tool call into a verdict or a card and
``cards`` runs the card to the runner's answer; ``uploads`` and ``attachments`` take an image from
the phone to a saved file.
"""

__all__: list[str] = []
