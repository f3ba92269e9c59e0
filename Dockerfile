# compactor as a container: build with the compiler alone, run with the
# production dependencies only, as the unprivileged `node` user.
#
#   docker build -t compactor .
#   docker run --rm --network host -e COMPACTOR_HOST=127.0.0.1 compactor
#
# (Linux, llama-server on the host's 127.0.0.1:8080; elsewhere see README.md
# § Running beside llama-server.) Configuration: COMPACTOR_* variables (see
# `compactor --help`), or a YAML file mounted into the container and named by
# COMPACTOR_CONFIG, e.g.
#   -v ./config.yaml:/etc/compactor/config.yaml:ro -e COMPACTOR_CONFIG=/etc/compactor/config.yaml
# docker/compose.yaml runs it beside llama-server. `docker run … compactor
# node dist/main.js doctor` checks the setup from inside the container.

# Node's Active LTS line, the exact release .ci/run runs the whole suite on
# (besides Node 20, the oldest the project supports).
ARG NODE_VERSION=26.12.1

FROM node:${NODE_VERSION}-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# What tsc needs and nothing of the test tools: the production dependencies (src/ compiles
# against their types), then the compiler and Node's types, at package.json's versions, beside them.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund
RUN npm install --prefix /opt/compiler --ignore-scripts --no-audit --no-fund typescript@5.9.3 @types/node@20.19.43
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN /opt/compiler/node_modules/.bin/tsc -p tsconfig.build.json --typeRoots /opt/compiler/node_modules/@types

FROM node:${NODE_VERSION}-slim AS runtime
ENV NODE_ENV=production \
    COMPACTOR_HOST=0.0.0.0 \
    COMPACTOR_PORT=8081
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config.example.yaml ./
USER node
EXPOSE 8081
# The process answers; no curl in a slim image, so Node asks.
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.COMPACTOR_PORT||8081)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "dist/main.js"]
