# turnstile — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

MODULES := pkg migrations services/intake services/worker services/gateway services/a2a services/aisdk services/langgraph services/notifier services/router cmd/turnstile loadtest deploy examples/agents/go
SERVICES := intake worker gateway a2a aisdk langgraph notifier router
GO ?= go
TEST_FLAGS ?= -race -count=1 -timeout 15m
export TURNSTILE_HTTP_ADDR ?= 127.0.0.1:8080

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build every binary into bin/
	@mkdir -p bin
	$(GO) build -o bin/turnstile ./cmd/turnstile
	@for s in $(SERVICES); do echo "$(GO) build -o bin/turnstile-$$s ./services/$$s/cmd/turnstile-$$s"; \
		$(GO) build -o bin/turnstile-$$s ./services/$$s/cmd/turnstile-$$s || exit 1; done
	$(GO) build -o bin/turnstile-loadtest ./loadtest/cmd/turnstile-loadtest

.PHONY: dev
dev: build ## run every role on one port (8080) with the embedded Kafka broker against local Postgres and Redis
	TURNSTILE_MIGRATE=auto ./bin/turnstile

.PHONY: dev-agents
dev-agents: build ## make dev with two agents: support (demo) and research (openai against the load generator's fake model)
	./scripts/dev-agents.sh

.PHONY: chromium
chromium: ## install Debian's chromium for the browser tests when it is missing
	./scripts/ensure-chromium.sh

.PHONY: node
node: ## install the Node test clients (clients/*/) from their lockfiles with npm ci
	@set -e; for d in clients/*/; do [ -f "$$d/package.json" ] || continue; \
		echo "== npm ci $$d"; (cd "$$d" && npm ci --no-audit --no-fund --loglevel=error); done

.PHONY: test
test: chromium node ## run every module's tests against real Postgres, Redis and the embedded broker
	@set -e; for m in $(MODULES); do \
		echo "== $$m"; (cd $$m && $(GO) test $(TEST_FLAGS) ./...); \
	done

GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

.PHONY: lint
lint: ## gofmt, go vet and golangci-lint (.golangci.yml) over every module
	@set -e; test -z "$$(gofmt -l $(MODULES))" || { gofmt -l $(MODULES); echo "gofmt: files above need formatting"; exit 1; }
	@set -e; for m in $(MODULES); do echo "== vet $$m"; (cd $$m && $(GO) vet ./...); done
	@set -e; for m in $(MODULES); do echo "== golangci-lint $$m"; (cd $$m && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...); done

.PHONY: tidy
tidy: ## go mod tidy every module (each also builds on its own, outside the workspace)
	@set -e; for m in $(MODULES); do echo "== tidy $$m"; (cd $$m && GOWORK=off $(GO) mod tidy); done

.PHONY: docs
docs: ## regenerate docs/CONFIGURATION.md from pkg/config's field comments (a pkg/config test fails when it is stale)
	$(GO) run ./pkg/config/internal/gendoc -config pkg/config -out docs/CONFIGURATION.md

.PHONY: a2apb
a2apb: ## regenerate pkg/a2apb (A2A 1.0 types) from A2A_PROTO=path/to/specification/a2a.proto (see scripts/gen-a2apb.sh)
	scripts/gen-a2apb.sh $(A2A_PROTO) $(A2A_VERSION)

.PHONY: migrate
migrate: build ## apply the database migrations to TURNSTILE_DATABASE_URL
	./bin/turnstile migrate

.PHONY: bench
bench: ## run the benchmarks, each beside its baseline (see docs/BENCHMARKS.md); the gateway's at its default cap of streams
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem -count=1 ./...); done

.PHONY: loadtest
loadtest: build ## run every load-test scenario, each figure beside its floor; reports and plots in loadtest-out/ (see docs/BENCHMARKS.md)
	@# Eight turns a session: the burst's backlog (a minute of the capacity) is followed over half the
	@# streams four would take, two open files each with the stack in process (docs/BENCHMARKS.md).
	./bin/turnstile-loadtest -scenario burst -turns-per-session 8 -out loadtest-out
	@# The peer comparison, then turnstile at 25% and 50% of its capacity beside Postgres's CPU.
	./bin/turnstile-loadtest -scenario peer -rounds 3 -out loadtest-out
	@# Added latency for an agent that answers at once, at 10/50/90% of capacity, beside the floor.
	@# One calibration at 400/s: a doubled one overloads intake on two shared cores (docs/BENCHMARKS.md).
	./bin/turnstile-loadtest -scenario latency -calibrate-rate 400 -calibrate-attempts 1 -calibrate 6s -level 15s -drain-max 2m -out loadtest-out
	@# One worker process holding many 30-second model streams; INFLIGHT_TURNS sizes it.
	./bin/turnstile-loadtest -scenario inflight -turns $(INFLIGHT_TURNS) -out loadtest-out
	@# Tenant a's 20,000 one-second turns at once beside ten tenants at 2/s each: fair, a absent, arrival order.
	./bin/turnstile-loadtest -scenario fairness -out loadtest-out

INFLIGHT_TURNS ?= 10000

COMPOSE_PROFILES ?=
.PHONY: up
up: ## run the full stack with Apache Kafka under docker compose (COMPOSE_PROFILES=observability adds Prometheus)
	COMPOSE_PROFILES=$(COMPOSE_PROFILES) docker compose up --build

.PHONY: up-regions
up-regions: ## run two regions (euw1, use1) behind one router under docker compose (docker-compose.regions.yml)
	docker compose -f docker-compose.regions.yml up --build
