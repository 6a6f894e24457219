# The detour manager image: a static binary on an empty base that runs as a non-root user.
#
#   docker build -t detour:dev .
#
# Stage 1 builds with the Go toolchain; module downloads are a layer of their own, so changing
# the code does not download the modules again.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY pkg/ pkg/
# Set by BuildKit for multi-platform builds; default to the build machine's platform.
ARG TARGETOS=linux
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager

# Stage 2: nothing but the binary and the CA certificates (for API servers with public
# certificates); the numeric user needs no passwd entry.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
