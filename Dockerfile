# syntax=docker/dockerfile:1
# The argocd-pull-addon image: /manager (the hub addon-manager, run by the Helm chart) and
# /agent (deployed to each managed cluster by the addon framework). Both are static Go
# binaries on distroless, running as a non-root numeric user (runAsNonRoot can verify it).
#
#   docker build -t quay.io/ocm-gitops/argocd-pull-addon:latest .
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... --push .

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS builder
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
# Dependencies first, so that a source change reuses the module layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
ENV CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} GOFLAGS=-trimpath
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags='-s -w' -o /out/manager ./cmd/manager && \
    go build -ldflags='-s -w' -o /out/agent ./cmd/agent

FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.source="https://github.com/ocm-gitops/argocd-pull-addon" \
      org.opencontainers.image.description="OCM addon that gives Argo CD a pull model: hub manager and spoke agent"
COPY --from=builder /out/manager /manager
COPY --from=builder /out/agent /agent
USER 65532:65532
ENTRYPOINT ["/manager"]
