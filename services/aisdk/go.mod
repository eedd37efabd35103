module github.com/turnstile-run/turnstile/services/aisdk

go 1.26.0

require github.com/turnstile-run/turnstile/pkg v0.0.0

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)

replace (
	github.com/turnstile-run/turnstile/migrations => ../../migrations
	github.com/turnstile-run/turnstile/pkg => ../../pkg
)
