# The fleet controller image (for the Helm chart in helm/fleet).
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY fleet ./fleet
RUN pip install --no-cache-dir . && useradd --uid 65532 fleet
USER 65532
ENTRYPOINT ["fleet"]
CMD ["controller"]
