# syntax=docker/dockerfile:1
#
# The one Modelgate image: every role is a subcommand of the same entry point.
#
#   docker build -t modelgate:dev .
#   docker run --rm modelgate:dev gateway --help
#   docker run --rm modelgate:dev operator --help
#   docker run --rm modelgate:dev runtime serve --model-path /models/m
#   docker run --rm modelgate:dev runtime fetch --source hf://org/name --dest /models/m
#
# Node 24 LTS in both stages, the project's baseline (package.json engines).
# Build and run on the same major so that whatever npm resolves at build time
# is what runs.
ARG NODE_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12:nonroot

# ---- build: install, compile, drop dev dependencies -------------------------
FROM ${NODE_IMAGE} AS build
# linux/amd64 → x64, linux/arm64 → arm64: which onnxruntime libraries to keep.
ARG TARGETARCH=amd64
WORKDIR /app
# onnxruntime-node's install script would download GPU libraries; the CPU
# libraries ship inside the package. package.json's allowScripts denies it
# on npm 11.19+; the variable covers an older npm in the image.
ENV ONNXRUNTIME_NODE_INSTALL=skip \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false \
    NPM_CONFIG_AUDIT=false

COPY package.json package-lock.json ./
RUN npm ci

COPY tsconfig.json tsconfig.build.json ./
COPY api ./api
COPY cli ./cli
COPY crds ./crds
COPY gateway ./gateway
COPY lib ./lib
COPY operator ./operator
COPY runtime ./runtime
RUN npm run build

# Keep production dependencies only, then the onnxruntime libraries of this
# platform only (linux/x64 or linux/arm64 CPU: libonnxruntime.so.1 and the
# N-API binding); the other platforms' copies are about 250 MB of dead weight.
RUN npm prune --omit=dev \
 && case "${TARGETARCH}" in arm64) ORT_ARCH=arm64 ;; *) ORT_ARCH=x64 ;; esac \
 && for dir in node_modules/onnxruntime-node/bin/napi-v*; do \
      find "$dir" -mindepth 1 -maxdepth 1 ! -name linux -exec rm -rf {} + ; \
      find "$dir/linux" -mindepth 1 -maxdepth 1 ! -name "${ORT_ARCH}" -exec rm -rf {} + ; \
      test -f "$dir/linux/${ORT_ARCH}/libonnxruntime.so.1" ; \
    done

# `modelgate` on PATH: the operator's pods run `command: ["modelgate"]`, and the
# final image has no shell and no /usr/bin/env, so the shebang names node itself.
RUN mkdir -p /out/bin \
 && printf '#!/nodejs/bin/node\nimport("/app/dist/cli/modelgate.js");\n' > /out/bin/modelgate \
 && chmod 0755 /out/bin/modelgate

# ---- final: node and the app, no shell, no npm, no compiler -----------------
FROM ${RUNTIME_IMAGE}
LABEL org.opencontainers.image.title="modelgate" \
      org.opencontainers.image.description="Model inference on Kubernetes behind a Responses-style HTTP API" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/modelgate/modelgate"
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /out/bin/modelgate /usr/local/bin/modelgate
# The distroless nonroot user; operator/children/deployment.ts (RUNTIME_UID)
# and the chart's securityContext assume this uid.
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/nodejs/bin/node", "/app/dist/cli/modelgate.js"]
CMD ["--help"]
