# `make test` is the test command CI runs (.ci/run) and the README documents.
GO ?= go

# Packages whose tests embed the Temporal server run without the race detector: a race
# build of the server takes far longer than the tests. Everything else runs under it.
EMBEDS_SERVER := /internal/e2e$$|/internal/devserver$$|/internal/testenv$$|/cmd/

.PHONY: test vet unit fuzz e2e bench
test: vet unit fuzz e2e

vet:
	$(GO) vet ./...

# Each unit package takes seconds (workflows, with its 5000-member test, about a minute
# and a half under the race detector); the timeout turns a hang into a failure with every
# goroutine's stack. The 10,000-member bounds test would take minutes under the race
# detector, so it runs once more without it (and skips under it). The e2e suite bounds
# each test on its own (testlimit.Guard, 3 minutes), so its package timeout only has to
# cover the whole suite: about 18 minutes on an idle 2-core machine, more on a busy one.
unit:
	$(GO) test -race -timeout 10m $$($(GO) list ./... | grep -Ev '$(EMBEDS_SERVER)')
	$(GO) test -timeout 10m -run 'AtTenThousandMembers' ./workflows

# Input from outside (the gateway's Alertmanager payloads, specs) is fuzzed for a few seconds
# beyond its seed corpus (testdata/fuzz); a panic fails the run and leaves the input there.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzAlertmanagerPayload -fuzztime 15s ./internal/gateway
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 15s ./spec

e2e:
	$(GO) test -timeout 30m ./internal/e2e/...

bench:
	bench/deploy.sh
