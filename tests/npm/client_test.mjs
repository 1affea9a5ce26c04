// The official JavaScript Hub client, @huggingface/hub (pinned by package-lock.json next to this
// file), against the local Hub (tools/hub_server.py) on loopback: what the client expects of the
// real Hub, the local Hub must give. run_client_test.py prepares the repos, starts the servers and
// runs this with HUBFS_NPM_FIXTURE naming a JSON description of them. Exits 1 on any failure.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const fx = JSON.parse(readFileSync(process.env.HUBFS_NPM_FIXTURE, "utf8"));
const hub = await import(pathToFileURL(path.join(fx.clientDir, "node_modules/@huggingface/hub/dist/index.mjs")).href);
const { listFiles, downloadFile, pathsInfo, modelInfo, fileExists, HubApiError, __internal_XetBlob: XetBlob } = hub;

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");
const local = (p) => readFileSync(p);

// Every request the client makes, for the checks on how it made them.
const requests = [];
const recordingFetch = (input, init) => {
  const headers = new Headers(init?.headers);
  requests.push({ url: String(input), range: headers.get("Range"), auth: headers.has("Authorization") });
  return fetch(input, init);
};

const failures = [];
async function check(name, fn) {
  const started = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - started} ms)`);
  } catch (e) {
    failures.push(name);
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}

async function hubError(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof HubApiError, `expected a HubApiError, got ${e}`);
    return e;
  }
  assert.fail("expected the call to fail");
}

const xetRepo = { type: "model", name: fx.repo };
const files = fx.files;

await check("listFiles pages through a recursive listing (Link: next)", async () => {
  requests.length = 0;
  const got = [];
  for await (const e of listFiles({ repo: xetRepo, recursive: true, hubUrl: fx.hubUrl, fetch: recordingFetch })) {
    got.push(e);
  }
  const pages = requests.filter((r) => r.url.includes("/tree/")).length;
  assert.equal(pages, Math.ceil(fx.listing.length / fx.pageSize), "one request per page");
  assert.deepEqual(got.map((e) => e.path).sort(), [...fx.listing].sort());
  for (const e of got.filter((e) => e.type === "file")) {
    const f = files[e.path];
    assert.equal(e.size, f.size, e.path);
    if (f.lfs) {
      assert.equal(e.lfs?.oid, f.sha256, e.path);
      assert.equal(e.lfs?.size, f.size, e.path);
      assert.match(e.xetHash ?? "", /^[0-9a-f]{64}$/, `${e.path} has a xetHash`);
    } else {
      assert.equal(e.lfs, undefined, e.path);
    }
  }
  const sub = [];
  for await (const e of listFiles({ repo: xetRepo, path: "many", hubUrl: fx.hubUrl })) sub.push(e.path);
  assert.deepEqual(sub.sort(), fx.listing.filter((p) => p.startsWith("many/")).sort());
});

await check("downloadFile of small files (resolve 307 to /api/resolve-cache/), sha256-exact", async () => {
  for (const [p, f] of Object.entries(files).filter(([, f]) => !f.lfs)) {
    requests.length = 0;
    const blob = await downloadFile({ repo: xetRepo, path: p, hubUrl: fx.hubUrl, fetch: recordingFetch });
    assert.ok(blob, p);
    assert.equal(blob.size, f.size, p);
    assert.equal(sha256(Buffer.from(await blob.arrayBuffer())), f.sha256, p);
  }
  const missing = await downloadFile({ repo: xetRepo, path: "no/such/file.txt", hubUrl: fx.hubUrl });
  assert.equal(missing, null, "a missing file is null (EntryNotFound)");
});

await check("downloadFile of LFS files (not Xet): the CDN, no Authorization sent there", async () => {
  for (const [p, f] of Object.entries(files).filter(([, f]) => f.lfs)) {
    requests.length = 0;
    const blob = await downloadFile({ repo: xetRepo, path: p, hubUrl: fx.lfsHubUrl, fetch: recordingFetch });
    assert.ok(!(blob instanceof XetBlob), `${p} is not read as Xet from a Hub without Xet`);
    assert.equal(blob.size, f.size, p);
    assert.equal(sha256(Buffer.from(await blob.arrayBuffer())), f.sha256, p);
    const part = Buffer.from(await blob.slice(1000, 5000).arrayBuffer());
    assert.ok(part.equals(local(f.local).subarray(1000, 5000)), `${p} slice`);
  }
});

await check("downloadFile of Xet files takes the Xet route, sha256-exact", async () => {
  for (const [p, f] of Object.entries(files).filter(([, f]) => f.lfs)) {
    requests.length = 0;
    const blob = await downloadFile({ repo: xetRepo, path: p, hubUrl: fx.hubUrl, fetch: recordingFetch });
    assert.ok(blob instanceof XetBlob, `${p} is read through XetBlob`);
    assert.equal(blob.size, f.size, p);
    assert.equal(sha256(Buffer.from(await blob.arrayBuffer())), f.sha256, p);
    assert.ok(requests.some((r) => r.url.includes("/v2/reconstructions/")), "a V2 reconstruction");
    assert.ok(requests.some((r) => r.url.includes("/xorbs/")), "xorbs fetched");
    assert.ok(!requests.some((r) => r.url.includes("/blobs/")), "never the bridge");
    assert.ok(!requests.some((r) => r.url.includes("/xorbs/") && r.auth), "no Authorization to xorb URLs");
  }
});

await check("XetBlob slices at chunk and xorb boundaries", async () => {
  const x = fx.xet;
  const bytes = local(files[x.path].local);
  const blob = new XetBlob({ hash: x.hash, size: x.size, refreshUrl: x.refreshUrl, fetch: recordingFetch });
  const cuts = [];
  for (const b of x.chunkBoundaries) cuts.push([b - 1, b + 1], [b, b + 1], [b - 7, b]);
  for (const b of x.xorbBoundaries) cuts.push([b - 5000, b + 5000], [b - 1, b + 1]);
  cuts.push([0, 1], [0, x.size], [x.size - 1, x.size], [x.chunkBoundaries[0] - 3, x.xorbBoundaries.at(-1) + 3]);
  for (const [a, b] of cuts) {
    const got = Buffer.from(await blob.slice(a, b).arrayBuffer());
    assert.ok(got.equals(bytes.subarray(a, b)), `slice ${a}-${b} (${got.length} bytes)`);
  }
});

await check("a v2 revision rebuilt from shared and new xorbs", async () => {
  const p = fx.xet.path;
  const plans = {};
  for (const [rev, want] of [["v1", files[p].sha256], ["v2", fx.v2.sha256]]) {
    requests.length = 0;
    const blob = await downloadFile({ repo: xetRepo, path: p, revision: rev, hubUrl: fx.hubUrl, fetch: recordingFetch });
    assert.ok(blob instanceof XetBlob);
    assert.equal(sha256(Buffer.from(await blob.arrayBuffer())), want, rev);
    plans[rev] = blob.reconstructionInfo;
    if (rev === "v2") {
      // A v1 xorb the edits split in pieces is listed as several ranges of one URL: the client
      // asks for all of them at once (multipart/byteranges).
      assert.ok(requests.some((r) => r.url.includes("/xorbs/") && (r.range ?? "").includes(",")), "a multi-range fetch");
    }
  }
  const v1 = new Set(plans.v1.terms.map((t) => t.hash));
  const v2 = plans.v2.terms.map((t) => t.hash);
  assert.ok(v2.some((h) => v1.has(h)), "shares xorbs with v1");
  assert.ok(v2.some((h) => !v1.has(h)), "has new xorbs");
  const changed = new Set(fx.v2.changedSlices.map(([a]) => a));
  for (const [a, b] of [...fx.v2.changedSlices, [0, 100]]) {
    const blob = await downloadFile({ repo: xetRepo, path: p, revision: "v2", hubUrl: fx.hubUrl });
    const got = Buffer.from(await blob.slice(a, b).arrayBuffer());
    assert.ok(got.equals(local(fx.v2.local).subarray(a, b)), `v2 slice ${a}-${b}${changed.has(a) ? " (changed)" : ""}`);
  }
});

await check("modelInfo (revision HEAD), pathsInfo, fileExists (/raw/)", async () => {
  const info = await modelInfo({ name: fx.repo, hubUrl: fx.hubUrl });
  assert.equal(info.name, fx.repo);
  assert.equal(info.private, false);
  assert.equal(info.gated, false);
  assert.match(info.id, /^[0-9a-f]{24}$/);
  assert.equal(info.updatedAt.toISOString(), "2025-01-01T00:00:00.000Z");
  const got = await pathsInfo({ repo: xetRepo, paths: ["README.md", fx.xet.path, "no/such"], hubUrl: fx.hubUrl });
  assert.deepEqual(got.map((e) => e.path).sort(), ["README.md", fx.xet.path]);
  const xet = got.find((e) => e.path === fx.xet.path);
  assert.equal(xet.lfs?.oid, files[fx.xet.path].sha256);
  assert.equal(xet.size, files[fx.xet.path].size);
  for (const [p, want] of [["README.md", true], [fx.xet.path, true], ["many/f0.txt", true], ["no/such", false]]) {
    assert.equal(await fileExists({ repo: xetRepo, path: p, hubUrl: fx.hubUrl }), want, p);
  }
  // (A gated file's HEAD answer is an error without a body; the client then fails parsing it as
  // JSON, whatever the server: not asserted here.)
  assert.equal(await fileExists({ repo: { type: "model", name: fx.gatedRepo }, path: "README.md", hubUrl: fx.hubUrl }), true);
});

await check("private repo: 401 without a token, 404 with one that has no access, readable with access", async () => {
  const repo = { type: "model", name: fx.privateRepo };
  const none = await hubError(listFiles({ repo, hubUrl: fx.hubUrl }).next());
  assert.equal(none.statusCode, 401);
  const noAccess = await hubError(listFiles({ repo, hubUrl: fx.hubUrl, accessToken: fx.tokenNoAccess }).next());
  assert.equal(noAccess.statusCode, 404);
  assert.match(noAccess.message, /Repository Not Found/);
  const blob = await downloadFile({ repo, path: "secret.txt", hubUrl: fx.hubUrl, accessToken: fx.token });
  assert.equal(await blob.text(), "s3cret\n");
});

await check("gated repo: 401/403 GatedRepo on its files, README.md public, .gitattributes gated", async () => {
  const repo = { type: "model", name: fx.gatedRepo };
  const readme = await downloadFile({ repo, path: "README.md", hubUrl: fx.hubUrl });
  assert.equal(await readme.text(), "# gated\n");
  const anon = await hubError(downloadFile({ repo, path: "secret.txt", hubUrl: fx.hubUrl }));
  assert.equal(anon.statusCode, 401);
  assert.match(anon.message, /restricted/);
  const attrs = await hubError(downloadFile({ repo, path: ".gitattributes", hubUrl: fx.hubUrl }));
  assert.equal(attrs.statusCode, 401);
  const refused = await hubError(downloadFile({ repo, path: "secret.txt", hubUrl: fx.hubUrl, accessToken: fx.tokenNoAccess }));
  assert.equal(refused.statusCode, 403);
  assert.match(refused.message, /ask for access/);
  const granted = await downloadFile({ repo, path: "secret.txt", hubUrl: fx.hubUrl, accessToken: fx.token });
  assert.equal(await granted.text(), "s3cret\n");
  const listed = [];
  for await (const e of listFiles({ repo, hubUrl: fx.hubUrl })) listed.push(e.path);
  assert.deepEqual(listed.sort(), [".gitattributes", "README.md", "secret.txt"]);
});

await check("an invalid token is refused with 401 even on a public repo", async () => {
  const e = await hubError(listFiles({ repo: xetRepo, hubUrl: fx.hubUrl, accessToken: "hf_invalid" }).next());
  assert.equal(e.statusCode, 401);
  assert.match(e.message, /Invalid credentials in Authorization header/);
  const d = await hubError(downloadFile({ repo: xetRepo, path: "README.md", hubUrl: fx.hubUrl, accessToken: "hf_invalid" }));
  assert.equal(d.statusCode, 401);
});

if (failures.length) {
  console.log(`${failures.length} check(s) failed: ${failures.join("; ")}`);
  process.exit(1);
}
console.log("all checks passed");
