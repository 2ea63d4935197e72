# One image for every role; the command picks the role.
FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# CPU-only: --omit=optional skips node-llama-cpp's GPU variants (~640 MB); the CPU binding
# (@node-llama-cpp/linux-x64) is a regular dependency. On CUDA hosts install @node-llama-cpp/linux-x64-cuda too.
RUN npm install --omit=dev --omit=optional --no-audit --no-fund && npm cache clean --force
COPY src ./src
COPY workers ./workers
COPY projections ./projections
COPY migrations ./migrations
COPY models ./models
USER node
EXPOSE 8080
CMD ["node", "--max-semi-space-size=16", "--import", "./src/observability/register.ts", "src/main.ts"]
