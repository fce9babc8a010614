# The Kafka Journal worker (a Faust app). Kafka and Cassandra come from docker-compose.yml.
FROM python:3.11-slim

# Unbuffered logs; no .pyc files in the image; pip quiet about its own version.
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# Only what `pip install .` needs: the virtualenv, .stack data and caches stay out of the image.
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY kjconfig ./kjconfig
COPY journal ./journal
COPY app ./app
COPY agents ./agents
COPY tables ./tables
COPY web ./web
COPY pipeline ./pipeline
COPY stack ./stack
COPY jars ./jars
# the worker extra (Faust, RocksDB, uvloop) at the versions CI tests
RUN pip install --no-cache-dir -c constraints.txt '.[worker]'

# Run unprivileged, from a directory it owns: Faust writes its table state (RocksDB) under
# the working directory unless told otherwise.
RUN useradd --create-home journal && mkdir -p /data && chown journal /data
USER journal
WORKDIR /data
ENV KJ_KAFKA_BOOTSTRAP=kafka:19092 KJ_CASSANDRA_HOSTS=cassandra:9042
EXPOSE 6066
CMD ["kafka-journal", "worker"]
