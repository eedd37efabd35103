// Builds the chat test page (chat/) that cmd/turnstile/integration's TestLangGraphChatUI serves
// from an origin of its own. It is a test fixture, not served by turnstile, so nothing is
// committed: the test builds it from these sources and the lockfile into a temporary directory
// (LG_CHAT_OUT_DIR).
import { defineConfig } from "vite";

export default defineConfig({
  root: "chat",
  base: "./",
  logLevel: "warn",
  esbuild: { jsx: "automatic" },
  build: {
    outDir: process.env.LG_CHAT_OUT_DIR ?? "../dist-chat",
    emptyOutDir: true,
    sourcemap: false,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 1024,
  },
});
