# Builds the clusterflow binary (CLI, worker and agent in one) and ships it on a slim
# Debian: startscripts run in the worker's container and need a shell and coreutils.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/clusterflow ./cmd/clusterflow

FROM debian:bookworm-slim
RUN useradd --system --create-home --home-dir /var/lib/clusterflow clusterflow
COPY --from=build /out/clusterflow /usr/local/bin/clusterflow
USER clusterflow
WORKDIR /var/lib/clusterflow
ENTRYPOINT ["clusterflow"]
CMD ["worker", "--data", "/var/lib/clusterflow"]
