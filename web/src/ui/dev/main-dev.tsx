// Development entry: the UI against the in-memory registry (built only by dev/build-dev.mjs).
import { mountApp } from "../app";
import { fakeRegistry } from "./fake";

const params = new URLSearchParams(location.search);
const root = document.getElementById("app");
if (root) mountApp(fakeRegistry({ bigN: Number(params.get("n") ?? 5000), empty: params.has("empty") }), root);
