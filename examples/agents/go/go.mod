module github.com/turnstile-run/turnstile/examples/agents/go

go 1.26.0
