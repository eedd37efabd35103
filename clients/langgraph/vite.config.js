// Builds the useStream demo page (page/) into the langgraph role's embedded assets. The bundle is
// committed, so `go build` needs no Node; cmd/turnstile/integration's TestLangGraphPageBundleCurrent
// rebuilds it and fails when the committed one differs.
import { defineConfig } from "vite";

export default defineConfig({
  root: "page",
  base: "/langgraph/",
  logLevel: "warn",
  esbuild: { jsx: "automatic" },
  build: {
    outDir: process.env.LG_OUT_DIR ?? "../../../services/langgraph/internal/web/static",
    emptyOutDir: true,
    sourcemap: false,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 1024,
  },
});
