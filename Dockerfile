# compactor as a container: build with the dev dependencies (TypeScript),
# run with the production ones only, as the unprivileged `node` user.
#
#   docker build -t compactor .
#   docker run --rm -p 127.0.0.1:8081:8081 -e COMPACTOR_UPSTREAM_URL=http://host.docker.internal:8080 compactor
#
# Configuration: COMPACTOR_* variables (see `compactor --help`), or a YAML
# file mounted into the container and named by COMPACTOR_CONFIG, e.g.
#   -v ./config.yaml:/etc/compactor/config.yaml:ro -e COMPACTOR_CONFIG=/etc/compactor/config.yaml
# docker/compose.yaml runs it beside llama-server.

# The Node.js line in Active LTS; the project itself runs on Node >= 20.18.
ARG NODE_VERSION=26

FROM node:${NODE_VERSION}-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts: the build needs TypeScript only, not the test tools' native helpers.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

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
