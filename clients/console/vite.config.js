// Builds the operator console into services/intake/internal/console/dist, which the intake role
// embeds and serves at /console/. The output is committed; test/bundle.test.js fails when it is
// not what this build makes from the sources and the lockfile.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

export const outDir = fileURLToPath(new URL('../../services/intake/internal/console/dist', import.meta.url));

export default defineConfig({
  base: '/console/',
  plugins: [react()],
  logLevel: 'warn',
  build: { outDir, emptyOutDir: true, sourcemap: false },
});
