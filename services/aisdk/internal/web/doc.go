// Package web serves the useChat page at /chat/: the vite build of clients/aisdk, committed under
// dist/ and embedded, so the binary needs no Node at build or run time. clients/aisdk's
// test/bundle.test.js (run by `make test`) fails when dist/ is not what `npm run build` makes from
// the sources and the lockfile.
package web
