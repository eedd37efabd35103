// The console is served from services/intake/internal/console/dist, which is committed: this test
// builds the page again into a temporary directory and fails when the committed output differs
// (run `npm run build` in clients/console and commit dist/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { outDir } from '../vite.config.js';

async function files(dir) {
  const out = new Map();
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const path = join(e.parentPath, e.name);
    out.set(relative(dir, path), await readFile(path, 'utf8'));
  }
  return out;
}

test('the committed page is the build of the sources', async () => {
  const tmp = await mkdtemp(join(tmpdir(), 'console-build-'));
  try {
    await build({
      configFile: fileURLToPath(new URL('../vite.config.js', import.meta.url)),
      logLevel: 'silent',
      build: { outDir: tmp, emptyOutDir: true },
    });
    const want = await files(tmp);
    const got = await files(outDir);
    assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort(), 'run `npm run build` in clients/console and commit its dist/');
    for (const [name, body] of want) assert.equal(got.get(name), body, `${name} is stale: run npm run build`);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
});
