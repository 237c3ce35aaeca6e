# syntax=docker/dockerfile:1
# The dcs operator image. Build from the repository root (the whole workspace is the context):
#   docker build -f docker/operator.Dockerfile -t dcs-operator:0.1.0 .
# See docker/README.md.

FROM rust:1-bookworm AS build
WORKDIR /src
# zlib (flate2 through mysql_async) is built in and linked statically: the distroless runtime
# has no libz.so.1.
ENV LIBZ_SYS_STATIC=1 \
    CARGO_TERM_COLOR=never
COPY . .
# The caches keep the registry and the target dir between builds (BuildKit); the binary is
# copied out of the cached target dir so the next stage can take it.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target,id=dcs-target \
    cargo build --release --locked -p dcs-operator --bin dcs-operator \
    && install -D -m 0755 target/release/dcs-operator /out/dcs-operator

# glibc + libgcc, CA certificates, no shell, uid/gid 65532 ("nonroot").
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="dcs-operator" \
      org.opencontainers.image.description="The dcs controller: reconciles DorisChangelogSync into a runner workload and status" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/dcs-operator /usr/local/bin/dcs-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/dcs-operator"]
