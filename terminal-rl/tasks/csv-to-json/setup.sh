#!/bin/bash
set -euo pipefail
cat > /app/employees.csv <<'CSV'
id,name,department,salary,start_date
101,Maria Santos,Engineering,98000,2019-04-01
102,"Okafor, Chidi",Sales,67000,2020-11-15
103,Lena Fischer,Engineering,105500,2017-02-20
104,"Smith, Jr., Robert",Support,51000,2022-07-05
105,Yuki Tanaka,Marketing,72000,2021-01-11
106,Ahmed Khan,Sales,69500,2018-09-30
CSV
