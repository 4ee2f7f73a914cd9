"""update-readme.py: copies the per-API agreement table and totals of compat-tests/differential/results.md into README.md
("Differential suite" section, the Tests table and the compat-full row). Run from the repository root after run.sh.
"""
import re
rows=[]; tot=None
res=open('compat-tests/differential/results.md').read()
for l in res.splitlines():
    m=re.match(r'\| (\w+) \((\d+)\) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|', l)
    if m: rows.append(m.groups())
    m=re.match(r'\| total \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|', l)
    if m: tot=m.groups()
date=re.search(r'Run (\d{4}-\d\d-\d\d)', res).group(1)
half=(len(rows)+1)//2
left, right = rows[:half], rows[half:]
out=[]
for i in range(half):
    a=left[i]; cell=f'| {a[0]} ({a[1]}) | {a[2]} | {a[3]} | {a[4]} |'
    if i < len(right):
        b=right[i]; cell+=f' | {b[0]} ({b[1]}) | {b[2]} | {b[3]} | {b[4]} |'
    else:
        cell+=' | | | | |'
    out.append(cell)
p='README.md'
s=open(p).read()
hdr='| API | cases | identical | allowed | | API | cases | identical | allowed |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
a=s.index(hdr)+len(hdr); b=s.index('\n\n',a)
s=s[:a]+'\n'.join(out)+s[b:]
s=re.sub(r'Latest run, \d{4}-\d\d-\d\d \(\d+ requests: \d+ identical after normalisation, \d+ with allowed differences, \d+ failed\):',
         f'Latest run, {date} ({tot[0]} requests: {tot[1]} identical after normalisation, {tot[2]} with allowed differences, {tot[3]} failed):', s)
s=re.sub(r'the differential suite against Apache Kafka 4.4.0 \(\d+ raw requests', f'the differential suite against Apache Kafka 4.4.0 ({tot[0]} raw requests', s)
s=re.sub(r'differential, run alone \d{4}-\d\d-\d\d: \d+ passed, \d+ failed', f'differential, run alone {date}: {int(tot[0])-int(tot[3])} passed, {tot[3]} failed', s)
open(p,'w').write(s)
