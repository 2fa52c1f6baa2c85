#!/bin/bash
grep -c '\[ERROR\]' /app/app.log > /app/answer.txt
