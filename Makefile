# `make test` is the test command CI runs (.ci/run) and the README documents.
GO ?= go

# Packages whose tests embed the Temporal server run without the race detector: a race
# build of the server takes far longer than the tests. Everything else runs under it.
EMBEDS_SERVER := /internal/e2e$$|/internal/devserver$$|/internal/testenv$$|/cmd/

.PHONY: test vet unit e2e bench
test: vet unit e2e

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race $$($(GO) list ./... | grep -Ev '$(EMBEDS_SERVER)')

e2e:
	$(GO) test -timeout 30m ./internal/e2e/...

bench:
	bench/deploy.sh
