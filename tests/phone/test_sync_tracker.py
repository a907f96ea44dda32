"""The phone side of a sync (PROTOCOL-v10-wire.md §8): completion, re-requests, superseding."""

from __future__ import annotations

import pytest

from tests.support.phone_sync import SyncOutcome, SyncResult, SyncTracker


def test_a_full_delivery_completes() -> None:
    tracker = SyncTracker("s")
    tracker.request([])

    assert tracker.on_begin("sync-1", 120) is True
    assert tracker.on_end("sync-1", [(1, 50), (51, 100), (101, 120)]) is SyncOutcome.DONE

    assert tracker.result == SyncResult(
        session_id="s",
        complete=True,
        seq_high=120,
        delivered=((1, 120),),
        missing=(),
        requests=1,
        sync_ids=("sync-1",),
    )


def test_what_the_phone_had_counts_with_what_was_delivered() -> None:
    tracker = SyncTracker("s")
    tracker.request([(1, 50)])
    tracker.on_begin("sync-1", 80)

    assert tracker.on_end("sync-1", [(51, 80)]) is SyncOutcome.DONE
    assert tracker.result is not None and tracker.result.complete


def test_nothing_to_send_completes_at_once() -> None:
    tracker = SyncTracker("s")
    tracker.request([])
    tracker.on_begin("sync-1", 0)

    assert tracker.on_end("sync-1", []) is SyncOutcome.DONE
    assert tracker.result is not None and tracker.result.complete


def test_a_gap_is_re_requested_at_most_three_times() -> None:
    tracker = SyncTracker("s")
    tracker.request([])
    outcomes = []
    for attempt in range(4):
        tracker.on_begin(f"sync-{attempt}", 100)
        outcome = tracker.on_end(f"sync-{attempt}", [(1, 50)])
        outcomes.append(outcome)
        if outcome is SyncOutcome.REREQUEST:
            tracker.request([(1, 50)])

    assert outcomes == [SyncOutcome.REREQUEST] * 3 + [SyncOutcome.DONE]
    result = tracker.result
    assert result is not None
    assert (result.complete, result.missing, result.requests) == (False, ((51, 100),), 4)
    assert result.delivered == ((1, 50),)
    assert result.sync_ids == ("sync-0", "sync-1", "sync-2", "sync-3")


def test_a_re_request_that_fills_the_gap_completes() -> None:
    tracker = SyncTracker("s")
    tracker.request([])
    tracker.on_begin("a", 100)
    assert tracker.on_end("a", [(1, 50)]) is SyncOutcome.REREQUEST
    tracker.request([(1, 50)])
    tracker.on_begin("b", 100)

    assert tracker.on_end("b", [(51, 100)]) is SyncOutcome.DONE
    assert tracker.result is not None
    assert tracker.result.complete and tracker.result.delivered == ((1, 100),)


def test_only_the_latest_request_counts_when_a_newer_one_supersedes() -> None:
    tracker = SyncTracker("s")
    tracker.request([])
    tracker.request([(1, 10)])  # a second request before the first one began
    tracker.on_begin("first", 30)

    # The bridge aborts the first sync without sync-end, but a late one is ignored anyway.
    assert tracker.on_end("first", [(1, 30)]) is SyncOutcome.IGNORED
    tracker.on_begin("second", 30)
    assert tracker.on_end("second", [(11, 30)]) is SyncOutcome.DONE
    assert tracker.result is not None and tracker.result.complete


def test_unsolicited_begin_and_end_are_ignored() -> None:
    tracker = SyncTracker("s")

    assert tracker.on_begin("x", 10) is False
    assert tracker.on_end("x", []) is SyncOutcome.IGNORED
    assert tracker.done is False


def test_a_finished_sync_takes_no_more_requests() -> None:
    tracker = SyncTracker("s", max_rerequests=0)
    tracker.request([])
    tracker.on_begin("a", 5)
    assert tracker.on_end("a", []) is SyncOutcome.DONE

    with pytest.raises(RuntimeError, match="this sync is over"):
        tracker.request([])


def test_max_rerequests_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="max_rerequests must be >= 0"):
        SyncTracker("s", max_rerequests=-1)
