import { test } from "node:test";
import assert from "node:assert/strict";
import { npubEncode } from "nostr-tools/nip19";
import { parsePairFragment, PairLinkError } from "../src/core/fragment";

const hex = "7e7e9c42a91bfef19fa929e5fda1b72e0ebc1a4c1141673e2794234d86addf4e";
const npub = npubEncode(hex);
const enc = encodeURIComponent;

test("the pairing fragment gives the bridge, relays, machine and token", () => {
  const relays = ["ws://127.0.0.1:7777", "wss://relay.example/path?x=1,2"];
  const fragment = `#pair=${npub}&relays=${relays.map(enc).join(",")}&machine=${enc("my box")}&token=${enc("s3cr+t/=")}`;
  const link = parsePairFragment(fragment);
  assert.equal(link.bridgeHex, hex);
  assert.equal(link.bridgeNpub, npub);
  assert.deepEqual(link.relays, relays);
  assert.equal(link.machine, "my box");
  assert.equal(link.token, "s3cr+t/=");
});

test("a fragment without '#' works too, and duplicate relays collapse", () => {
  const link = parsePairFragment(`pair=${npub}&relays=${enc("ws://a:1")},${enc("ws://a:1")}&machine=m&token=t`);
  assert.deepEqual(link.relays, ["ws://a:1"]);
});

test("bad links are refused, and no error quotes the token", () => {
  const token = "TOPSECRET";
  const cases = [
    `#relays=${enc("ws://a:1")}&machine=m&token=${token}`,
    `#pair=npub1xyz&relays=${enc("ws://a:1")}&machine=m&token=${token}`,
    `#pair=${npub}&relays=${enc("https://a")}&machine=m&token=${token}`,
    `#pair=${npub}&relays=${enc("ws://a:1")}&machine=m`,
    `#pair=${npub}&relays=${enc("ws://a:1")}&machine=m&token=${token}&token=${token}`,
    `#pair=${npub}&relays=${enc("ws://a:1")}&machine=%E0%A4%A&token=${token}`,
  ];
  for (const fragment of cases) {
    assert.throws(() => parsePairFragment(fragment), (err: unknown) => {
      assert.ok(err instanceof PairLinkError);
      assert.ok(!err.message.includes(token), err.message);
      return true;
    }, fragment);
  }
});
