# One image for every control-plane role (web, worker, beat); the command picks the role.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 10001 sluice
WORKDIR /app
COPY pyproject.toml README.md ./
COPY controlplane ./controlplane
COPY dataplane ./dataplane
COPY sluice ./sluice
COPY manage.py ./
RUN pip install .
USER sluice
ENV SLUICE_VAR_DIR=/home/sluice/var
EXPOSE 8000
CMD ["uvicorn", "controlplane.asgi:application", "--host", "0.0.0.0", "--port", "8000"]
