module github.com/turnstile-run/turnstile/loadtest

go 1.26.0
