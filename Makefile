# `make test` is the test command CI runs (.ci/run) and the README documents.
GO ?= go
# For pipefail: `make test` keeps the steps' exit status through the pipe to its summary.
SHELL := /bin/bash

# Packages whose tests embed the Temporal server run without the race detector: a race
# build of the server takes far longer than the tests. Everything else runs under it.
EMBEDS_SERVER := /internal/e2e$$|/internal/devserver$$|/internal/testenv$$|/cmd/

# The unit step tests only packages that have tests: `go test` builds a package without
# any too, under the race detector, and three bench programs link the Temporal server.
UNIT_PACKAGES = $$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./... | grep -Ev '$(EMBEDS_SERVER)')

# Tests of ./workflows too slow under the race detector for what it adds (they start with
# withoutRace(t), and TestTheMakefileRunsEveryTestSkippedUnderRace keeps this list in step):
# the 10,000- and 5,000-member tests, the writes to hundreds of hosts (and a delete during
# them), and the replay of recorded histories, which runs one workflow goroutine at a time.
# They run once, without it.
WITHOUT_RACE := TestPayloadsStayBoundedAtTenThousandMembers|TestARolloutStaysBoundedAtTenThousandMembers|TestAWideRoleRunsInBatchesAndConfiguresEveryMemberOnce|TestAWideClusterContinuesAsNewWithinThePayloadLimit|TestReplayRecordedHistories|TestWritesToHundredsOfHostsRunInChildrenThatStopWaitingOnALostHost|TestADeleteWhileWritesRunInChildrenCancelsThem|TestACancelWhileWritesRunInChildrenStopsThem

# Added to every `go test` of the unit and e2e steps: `make test GOTESTFLAGS=-json > test.json`,
# then `go run ./bench/testtime test.json`, shows where the time goes.
GOTESTFLAGS ?=

# How many end-to-end tests run at once. They spend most of their time waiting on scripts,
# timers and timeouts, not on the CPU (the machine was idle for 60-80% of the serial suite).
E2E_PARALLEL ?= 4

# The end-to-end test of a fleet past one workflow's 2,000 pending activities (2,020
# simulated hosts) takes the machine: it runs in a step of its own, after the others, with
# the bench allowance of twice a test's three minutes (it took 80 to 140 s alone).
FLEET_TEST := TestAFleetPastOneWorkflowsPendingActivitiesRegistersAndReplacesLostHosts

.PHONY: test deps checks checks-beside vet unit fuzz e2e fleet bench build
# The end-to-end suite is the long pole and mostly waits, so the other steps run beside it,
# one after another, at a lower priority (nice): the two cores stay busy, only e2e builds
# the Temporal server, and the end-to-end tests that take the machine alone (a thousand
# members, the size matrix) are not slowed by the race detector's unit tests beside them
# (the thousand probed members took 2m18s to deploy beside them, and 13 s alone).
# CI shows only the end of the output, which a failed run's logs fill: a failed run ends
# with what failed, and each failed test's last messages (internal/testlimit/failures).
test: deps
	@out=$$(mktemp); trap 'rm -f "$$out"' EXIT; set -o pipefail; \
	{ $(MAKE) -j2 e2e checks-beside && $(MAKE) fleet; } 2>&1 | tee "$$out"; code=$$?; \
	if [ $$code -ne 0 ]; then $(GO) run ./internal/testlimit/failures < "$$out"; fi; \
	exit $$code

# A release's binaries (docs/releases.md), into BIN, named by the commit they are built from
# (`clusterflow version`): COMMIT, by default the checkout's, with "-dirty" when it has
# changes. The linker is told it, as the go command's VCS stamp is missing wherever GOFLAGS
# holds -buildvcs=false.
BIN ?= bin
COMMANDS ?= ./cmd/clusterflow ./cmd/clusterflow-host
COMMIT ?=
build:
	@commit='$(COMMIT)'; \
	if [ -z "$$commit" ]; then \
		commit=$$(git rev-parse HEAD) || { echo "make build: not a git checkout; name the commit with COMMIT=HASH" >&2; exit 1; }; \
		git diff --quiet HEAD || commit=$$commit-dirty; \
	fi; \
	$(GO) build -ldflags "-X github.com/clusterflow/clusterflow/internal/version.commit=$$commit" -o $(BIN)/ $(COMMANDS)

# What the tests need from Debian, installed if missing (as root; else it says how).
deps:
	.ci/deps

checks-beside:
	nice -n 15 $(MAKE) checks

checks:
	$(MAKE) vet
	$(MAKE) unit
	$(MAKE) fuzz

vet:
	$(GO) vet ./...

# The timeout turns a hang into a failure with every goroutine's stack. It counts wall time,
# and beside the end-to-end suite, at nice 15, the unit tests get the cores only when it
# leaves them: the workflows' race tests take 40 s alone and took 280 to 465 s there.
unit:
	$(GO) test $(GOTESTFLAGS) -race -timeout 20m $(UNIT_PACKAGES)
	$(GO) test $(GOTESTFLAGS) -timeout 20m -run '^($(WITHOUT_RACE))$$' ./workflows

# Input from outside (the gateway's Alertmanager payloads, specs) is fuzzed for some
# thousands of inputs beyond its seed corpus (testdata/fuzz); a panic fails the run and
# leaves the input there. A count, not a duration: Go's fuzzer can fail a timed run with
# "context deadline exceeded" when its workers are slow to stop on a busy machine.
FUZZ_INPUTS ?= 40000x
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzAlertmanagerPayload -fuzztime $(FUZZ_INPUTS) -timeout 5m ./internal/gateway
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZ_INPUTS) -timeout 5m ./spec

# The e2e suite bounds each test on its own (testlimit.Guard), so its package timeout only
# has to cover the whole suite on a slow machine: it takes 22 to 26 minutes here (see the
# contributor guide's Development section for what a test may cost).
# A missing Chromium fails the browser tests rather than skipping them, as everything
# else the tests need (deps installs it).
e2e:
	CLUSTERFLOW_BROWSER_REQUIRED=1 $(GO) test $(GOTESTFLAGS) -timeout 40m -parallel $(E2E_PARALLEL) -skip '^$(FLEET_TEST)$$' ./internal/e2e/...

fleet:
	CLUSTERFLOW_BENCH=1 $(GO) test $(GOTESTFLAGS) -timeout 10m -run '^$(FLEET_TEST)$$' ./internal/e2e

bench:
	bench/deploy.sh
