#!/bin/bash
set -euo pipefail
cat > /app/book.txt <<'TXT'
The River and the Mill

The mill stood where the river bent twice, and the miller said the river
had two minds. In spring the river ran fast and brown; in August it ran slow
and green, and the children of the valley waded in it up to their knees.

"Don't trust the river," the miller told his daughter. "It keeps what it takes."
She did not believe him. She was nine, and the river had only ever given her
things: a blue bottle, a wooden horse with three legs, 14 smooth stones that
she kept in a tin under the bed.

In the winter of 1887 the river froze from bank to bank. The mill wheel stopped,
and the miller walked the ice every morning to see whether it would hold. It held
until March. Then the river woke up, all at once, and took the bridge, the fence,
and half of the garden. The miller said nothing. His daughter said the river
was only taking back the things it had given her, and she put the tin of stones
on the window sill where the river could see them.

The mill was rebuilt the next summer. The river bent twice, as it always had,
and the children waded in it again. Nobody remembered the bridge for long.
TXT
