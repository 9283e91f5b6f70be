# Convenience targets; .ci/run is what CI runs.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

.PHONY: install test ci demo fmt vet
# Installs wsfs into $(go env GOPATH)/bin with its version stamped in.
install:
	go install -ldflags "-X main.version=$(VERSION)" ./cmd/wsfs
test:
	bash hack/ci-setup.sh && go test -race -count=1 -timeout 60m ./...
ci:
	bash .ci/run
demo:
	bash hack/demo.sh
fmt:
	gofmt -w .
vet:
	go vet ./...
