#!/bin/bash
cd /app/logs
{ zcat app.log.3.gz; zcat app.log.2.gz; cat app.log.1; cat app.log; } > /app/combined.log
