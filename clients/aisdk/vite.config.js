// Builds the useChat page into services/aisdk/internal/web/dist, which the aisdk role embeds and
// serves at /chat/. The output is committed; test/bundle.test.js fails when it is not what this
// build makes from the sources and the lockfile.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

export const outDir = fileURLToPath(new URL('../../services/aisdk/internal/web/dist', import.meta.url));

export default defineConfig({
  base: '/chat/',
  plugins: [react()],
  logLevel: 'warn',
  build: { outDir, emptyOutDir: true, sourcemap: false },
});
