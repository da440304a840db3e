GO ?= go
PKGS ?= ./...

.PHONY: run test bench bench-send lint soak fuzz fmt

run:
	$(GO) run ./cmd/gatehouse

# test is the one command CI runs: vet, then every test under the race
# detector, then the store conformance suite: the ledger's tests and the
# operation search again, on PostgreSQL (a throwaway cluster the tests
# start; see internal/pgtest).
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	GATEHOUSE_TEST_STORE=postgres $(GO) test -race -count=1 -timeout 15m ./ledger
	GATEHOUSE_TEST_STORE=postgres $(GO) test -race -count=1 -timeout 15m -run 'TestOperationSearch$$' ./proof

bench: bench-send
	$(GO) test -run '^$$' -bench . -benchmem -count 6 $(PKGS) | tee bench.txt
	@command -v benchstat >/dev/null && benchstat bench.txt || echo 'summarise with: go install golang.org/x/perf/cmd/benchstat@latest && benchstat bench.txt'

# bench-send: the gated audience send of 5,000 recipients against blind blasts, and a 100,000-row release end to end (docs/BENCHMARKS.md).
bench-send:
	$(GO) test -count=1 -v -run 'TestPipelinedSendVersusBlast|TestHundredThousandRecipients' -timeout 60m ./proof -args -proof.bench | grep -E '^(--- |ok|FAIL)|send benchmark|end to end'

# soak: the long proof runs (8 processes × 2,000 actions, the crash matrix, the operation search and its refund search at 8 seeds × 40,000 steps each, randomized kills of the pipelined send at 200 seeds, the audience shared-address search at 500 seeds, 100 executors and 20 audience sends stopped with SIGSTOP) under the race detector.
soak:
	$(GO) test -race -count=1 -v -run 'TestStress|TestCrashMatrix|TestOperationSearch|TestRandomKillPipelinedSend|TestAudienceSharedAddressSearch|TestSIGSTOP' -timeout 180m ./proof -args -proof.long > soak.txt 2>&1; s=$$?; grep -E '^(--- FAIL|ok|FAIL)|stress|crash matrix|kill points|operation search|refund search|randomized kills|shared-address search|SIGSTOP' soak.txt; exit $$s

# fuzz: each fuzz target for FUZZTIME (seed corpora also run as ordinary tests in make test).
FUZZTIME ?= 10s
fuzz:
	$(GO) test -run '^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./scenarios
	$(GO) test -run '^$$' -fuzz='^FuzzSMTPData$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./testmailbox
	$(GO) test -run '^$$' -fuzz='^FuzzHTTPQuery$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./testmailbox
	$(GO) test -run '^$$' -fuzz='^FuzzReadableMessage$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./testmailbox
	$(GO) test -run '^$$' -fuzz='^FuzzRead$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./ledger/audiencefile
	$(GO) test -run '^$$' -fuzz='^FuzzRead$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./ledger/crmfile
	$(GO) test -run '^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./destination/mailrender
	$(GO) test -run '^$$' -fuzz='^FuzzCanonicalRequest$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=1s ./destination

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')
