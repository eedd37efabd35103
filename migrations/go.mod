module github.com/turnstile-run/turnstile/migrations

go 1.26.0
