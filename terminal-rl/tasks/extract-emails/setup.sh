#!/bin/bash
set -euo pipefail
cat > /app/contacts.txt <<'TXT'
Name: Ana Lima <ana.lima@example.com>; phone 555-0101
Name: Bo Chen; email: BO.CHEN@Example.com (work), bochen+home@mail.example.org (home)
--- duplicates below, merged from the old CRM ---
ana.lima@example.com, Ana Lima, Lisbon
"Carla Diaz" carla_diaz@sub.example.net
Dmitri: no email on file (ask at reception: front-desk@)
Eve O'Neil - eve.oneil@example.co.uk - prefers phone
Contact carla_diaz@SUB.example.net for invoices; cc finance-team@example.com.
Farid <farid99@example.io>
TXT
