FROM python:3.11-slim
WORKDIR /srv/a2annotate
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY migrations ./migrations
COPY taxonomy ./taxonomy
COPY static ./static
RUN pip install --no-cache-dir -e .
EXPOSE 8000
CMD ["sh", "-c", "a2annotate db upgrade && a2annotate serve --host 0.0.0.0 --port 8000"]
