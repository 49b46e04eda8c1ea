# webhook-inbox: the two commands are `make dev` and `make test`.
#
# SAM's makefile build method calls build-<LogicalId> with ARTIFACTS_DIR set;
# the developer targets are dev, test, lint, setup and build.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
GOTOOLS   := $(GO) tool -modfile=tools/go.mod
PKGS      := ./...
# Lambda binaries: Graviton (arm64), static, no RPC shim (provided.al2023
# speaks the Runtime API), no paths or symbols baked in.
# LAMBDA_GOARCH is overridden by `make local`, which runs the binaries on
# this machine under the Lambda Runtime Interface Emulator.
LAMBDA_GOARCH ?= arm64
LAMBDA_ENV   := GOOS=linux GOARCH=$(LAMBDA_GOARCH) CGO_ENABLED=0
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags='-s -w -buildid='

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-24s %s\n", $$1, $$2}'

.PHONY: setup
setup: ## install what the tests and the dev stack need (PostgreSQL server, pinned Go tools, cfn-lint)
	@./scripts/setup-postgres.sh
	@# cfn-lint and the SAM translator: make lint and the template checks need
	@# them, make dev does not, so a failure here only warns (lint fails).
	@./scripts/setup-cfn-lint.sh >/dev/null || echo "setup: without cfn-lint, make lint and make test fail (make dev does not need it)" >&2
	@$(GO) mod download
	@cd tools && $(GO) mod download
	@# Build the pinned tools once into Go's cache (later runs are cache hits).
	@for t in gotestsum versitygw aws-lambda-rie sqlc; do $(GOTOOLS) -n $$t >/dev/null; done

# DEV_ARGS are more flags of `webhookdev dev` (make dev DEV_ARGS=--samples);
# --watch restarts the stack with the new code when a Go file changes.
DEV_ARGS ?=

.PHONY: dev
dev: setup ## the whole system in one process: Postgres, S3, receiver on http://127.0.0.1:3000, processor, archiver; restarts on code changes
	$(GO) run ./cmd/webhookdev dev --watch $(DEV_ARGS)

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 30000x; try FUZZTIME=2000000x)
	./scripts/fuzz-smoke.sh

# sqlc turns each package's queries/*.sql into internal/dbsqlc (see
# shared/sqlc.yaml); the generated code is committed.
SQLC := $(GOTOOLS) sqlc -f shared/sqlc.yaml

# shared/storage/schema.sql is the core tables as the migrations leave them
# (pg_dump of a throwaway cluster, internal/schemadump); generated and
# committed too, for a reader.
SCHEMA := $(GO) run ./cmd/webhookdev schema

.PHONY: generate
generate: ## regenerate the Go code of the SQL queries and shared/storage/schema.sql after changing a query or a migration
	$(SQLC) generate
	$(SCHEMA) -w

.PHONY: generate-check
generate-check: ## fail when the committed generated code (query code, schema.sql) is not what the queries and migrations give
	@$(SQLC) diff || { echo "generate-check: the generated query code is stale: run make generate and commit the result" >&2; exit 1; }
	@$(SCHEMA) || { echo "generate-check: shared/storage/schema.sql is stale: run make generate and commit the result" >&2; exit 1; }

.PHONY: build
build: ## compile every package and command, and the bench (its own module, which the main build does not see)
	$(GO) build $(PKGS)
	cd bench && $(GO) vet .

.PHONY: lint
lint: ## gofmt, go vet, and cfn-lint over template.yaml (no errors, no warnings)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@cfnlint=$$(./scripts/setup-cfn-lint.sh | tail -n1) && echo "$$cfnlint template.yaml" && "$$cfnlint" template.yaml

.PHONY: test
# Chromium only for the tests (the console's browser tests): make dev
# needs no browser, and must not ask for sudo to install one.
.PHONY: setup-browser
setup-browser: ## install Chromium for the console's browser tests (make test does)
	@./scripts/setup-chromium.sh || echo "setup: without Chromium, the console's browser tests skip (and fail under CI)" >&2

test: setup setup-browser build lint generate-check ## everything: install, build, vet, generated code fresh, fuzz smoke, all tests against a real Postgres
	@./scripts/fuzz-smoke.sh
	$(GOTOOLS) gotestsum --format pkgname-and-test-fails --format-hide-empty-pkg -- -count=1 -race -timeout 20m $(PKGS)
	@# A user's first handler (webhookdev new handler, a table with an identity
	@# column), generated into a copy of the module, leaves every test that links
	@# the handlers green; a step of its own so that the two runs do not compete.
	WEBHOOK_INBOX_SUITE_IN_COPY=1 $(GO) test -count=1 -timeout 30m -run TestGeneratedHandlerLeavesTheSuiteGreen ./internal/scaffold

.PHONY: test-short
test-short: ## the inner loop: every test under -short (as go test -short ./...), on one throwaway Postgres server (webhookdev postgres), from test binaries linked again only when they change
	$(GO) run ./cmd/webhookdev postgres -- env GO=$(GO) ./scripts/test-short.sh

.PHONY: cost
cost: ## each deployment profile's monthly cost from the translated template and dated prices; fails when docs/deploy.md disagrees (go run ./cmd/webhookdev cost -w rewrites it)
	$(GO) run ./cmd/webhookdev cost

.PHONY: bench
bench: setup ## measure against pgbench and River (bench/, its own module); writes docs/benchmarks.md and .json
	cd bench && $(GO) run . -out ../docs

# --- AWS SAM (BuildMethod: makefile) ---------------------------------------

.PHONY: build-ReceiverFunction
build-ReceiverFunction: ## SAM: build the receiver's bootstrap into $(ARTIFACTS_DIR)
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/receiver

.PHONY: build-ProcessorFunction
build-ProcessorFunction: ## SAM: build the processor's bootstrap into $(ARTIFACTS_DIR)
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/processor

.PHONY: build-ArchiverFunction
build-ArchiverFunction: ## SAM: build the archiver's bootstrap into $(ARTIFACTS_DIR)
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/archiver

.PHONY: build-OperatorFunction
build-OperatorFunction: ## SAM: build the operator function's bootstrap (acting) into $(ARTIFACTS_DIR)
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/operator

.PHONY: build-OperatorReadFunction
build-OperatorReadFunction: ## SAM: build the operator function's bootstrap (read only) into $(ARTIFACTS_DIR)
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/operator

.PHONY: build-MigrationFunction
build-MigrationFunction: ## SAM: build the migration function's bootstrap into $(ARTIFACTS_DIR)
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/migrator

# The migration function's front (MIGRATOR_MODE=front, outside the VPC):
# the same binary as MigrationFunction, deployed twice.
.PHONY: build-MigrationFrontFunction
build-MigrationFrontFunction: ## SAM: build the migration front's bootstrap (the migration function's binary) into $(ARTIFACTS_DIR)
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/migrator

.PHONY: build-RelayFunction
build-RelayFunction: ## SAM: build the relay's bootstrap (outside the VPC: wake-up schedules, the sources copy) into $(ARTIFACTS_DIR)
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/relay

.PHONY: local
local: setup ## run the real Lambda binaries under the Runtime Interface Emulator (sam local without Docker)
	$(GO) run ./cmd/webhookdev local
