#!/usr/bin/python3
"""ftrace2blktrace: the kernel's `blk` ftrace tracer output as blktrace's binary files.

Under kernel lockdown blktrace's debugfs files are refused, but ftrace's `blk` tracer (the
same blk_add_trace_* calls, printed as blkparse prints them) still works. This turns its text
back into struct blk_io_trace records (blockcore/blk_trace_api.h), one NAME.blktrace.CPU file
per CPU, so that blkparse and btt read the kernel's trace as they read biofs's.

  tools/ftrace2blktrace.py TRACE_TEXT OUTDIR [NAME]     (NAME default: kernel)

Times have the tracer's microsecond resolution; a C record's error and a U record's depth come
from the text. Lines that are not blk records are skipped.
"""
import re
import struct
import sys
from collections import defaultdict

MAGIC = 0x65617400 | 0x07
TC = dict(READ=1 << 0, WRITE=1 << 1, FLUSH=1 << 2, SYNC=1 << 3, QUEUE=1 << 4, ISSUE=1 << 6,
          COMPLETE=1 << 7, FS=1 << 8, NOTIFY=1 << 10, AHEAD=1 << 11, META=1 << 12, DISCARD=1 << 13, FUA=1 << 15)
ACTIONS = {  # letter: (basic action, category)
    'Q': (1, 'QUEUE'), 'M': (2, 'QUEUE'), 'F': (3, 'QUEUE'), 'G': (4, 'QUEUE'), 'S': (5, 'QUEUE'),
    'D': (7, 'ISSUE'), 'C': (8, 'COMPLETE'), 'P': (9, 'QUEUE'), 'U': (10, 'QUEUE'), 'UT': (11, 'QUEUE'),
    'I': (12, 'QUEUE'), 'X': (13, None),
}
LINE = re.compile(r'^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>[\d.]+):\s+'
                  r'(?P<maj>\d+),(?P<min>\d+)\s+(?P<act>[A-Z]+)\s+(?P<rwbs>[A-Z]+)\s*(?P<rest>.*)$')


def category(rwbs):
    tc, i = 0, 0
    if rwbs.startswith('F'):
        tc |= TC['FLUSH']
        i = 1
    for ch in rwbs[i:]:
        tc |= {'D': TC['DISCARD'], 'W': TC['WRITE'], 'R': TC['READ'], 'F': TC['FUA'], 'A': TC['AHEAD'],
               'S': TC['SYNC'], 'M': TC['META']}.get(ch, 0)
    return tc


def main():
    src, outdir = sys.argv[1], sys.argv[2]
    name = sys.argv[3] if len(sys.argv) > 3 else 'kernel'
    files = defaultdict(bytearray)
    seq = defaultdict(int)
    named = set()
    for line in open(src):
        m = LINE.match(line)
        if not m or m['act'] not in ACTIONS:
            continue
        basic, cat = ACTIONS[m['act']]
        rest = m['rest']
        sector, nbytes, error, pdu = 0, 0, 0, b''
        tc = category(m['rwbs']) if m['rwbs'] != 'N' else 0
        if cat:
            tc |= TC[cat]
        if m['act'] in ('D', 'C'):
            tc |= TC['FS']
        if m['act'] in ('U', 'UT'):
            pdu = struct.pack('>Q', int(rest.split()[-1]))
        elif m['act'] == 'X':
            s = re.match(r'(\d+) / (\d+)', rest)
            sector = int(s[1])
            pdu = struct.pack('>Q', int(s[2]))
        elif m['act'] != 'P':
            s = re.match(r'(\d+) \+ (\d+)(?: \[(-?\d+)\])?', rest)
            if not s:
                continue
            sector, nbytes = int(s[1]), int(s[2]) * 512
            if m['act'] == 'C' and s[3]:
                error = int(s[3]) & 0xffff
        cpu = int(m['cpu'])
        dev = int(m['maj']) << 20 | int(m['min'])
        t = int(round(float(m['ts']) * 1e9))
        pid = int(m['pid'])
        if pid not in named:  # the kernel's trace_note_tsk(): the task's name, once
            named.add(pid)
            comm = m['comm'].strip().encode()[:15].ljust(16, b'\0')
            files[cpu] += struct.pack('<IIQQIIIIIHH', MAGIC, seq[cpu], t, 0, 0, TC['NOTIFY'] << 16,
                                      pid, dev, cpu, 0, len(comm)) + comm
            seq[cpu] += 1
        files[cpu] += struct.pack('<IIQQIIIIIHH', MAGIC, seq[cpu], t, sector, nbytes,
                                  basic | tc << 16, pid, dev, cpu, error, len(pdu)) + pdu
        seq[cpu] += 1
    for cpu in range(max(files) + 1 if files else 0):  # blkparse wants every CPU's file
        with open(f'{outdir}/{name}.blktrace.{cpu}', 'wb') as f:
            f.write(files.get(cpu, b''))


if __name__ == '__main__':
    main()
