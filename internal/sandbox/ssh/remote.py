# The remote side of the ssh executor: reads one JSON request on stdin,
# runs the code under the caps on this host and prints one JSON result.
# Confinement here: bubblewrap when the host has it (the same jail as the
# gateway's process executor), rlimits, a cgroup (pids, memory) when the
# cgroup filesystem is writable, a wall-time kill of the process group.
import base64, json, os, resource, shutil, signal, subprocess, sys, tempfile, threading, time

def main():
    req = json.loads(sys.stdin.read())
    caps = req['caps']
    work = tempfile.mkdtemp(prefix='agentry-ssh-')
    aux = tempfile.mkdtemp(prefix='agentry-ssh-code-')
    cg = []
    try:
        for rel, (b64, mode) in req['files'].items():
            p = os.path.normpath(os.path.join(work, rel))
            if not p.startswith(work + os.sep):
                raise SystemExit(json.dumps({'error': 'file path %r leaves the work directory' % rel}))
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, 'wb') as f:
                f.write(base64.b64decode(b64))
            os.chmod(p, mode & 0o777)
        code = os.path.join(aux, 'main.py')
        with open(code, 'w', encoding='utf-8') as f:
            f.write(req['code'])
        before = snap(work)
        cg = make_cgroup(caps)
        mech = ['rlimits']
        exe = os.path.realpath(sys.executable)
        bwrap = shutil.which('bwrap')
        env = {'PATH': '/sbx/bin', 'HOME': '/work', 'TMPDIR': '/tmp', 'LANG': 'C.UTF-8', 'PYTHONUNBUFFERED': '1', 'PYTHONDONTWRITEBYTECODE': '1'}
        tools = {}
        for t in req.get('tools') or []:
            w = shutil.which(t)
            if w:
                tools[t] = os.path.realpath(w)
        if bwrap:
            mech.insert(0, 'bubblewrap')
            argv = [bwrap, '--unshare-all'] + (['--share-net'] if caps.get('network') else []) + [
                '--die-with-parent', '--new-session', '--clearenv', '--uid', '65534', '--gid', '65534', '--hostname', 'sandbox',
                '--ro-bind', '/usr', '/usr']
            for l in ['bin', 'sbin', 'lib', 'lib64', 'lib32']:
                if os.path.islink('/' + l):
                    argv += ['--symlink', os.readlink('/' + l), '/' + l]
                elif os.path.isdir('/' + l):
                    argv += ['--ro-bind', '/' + l, '/' + l]
            for pre in {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix), os.path.dirname(os.path.dirname(exe))}:
                if pre != '/' and not (pre == '/usr' or pre.startswith('/usr/')):
                    argv += ['--ro-bind', pre, pre]
            argv += ['--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--bind', work, '/work', '--chdir', '/work',
                     '--dir', '/sbx/bin', '--ro-bind', code, '/sbx/main.py']
            for t, p in sorted(tools.items()):
                argv += ['--ro-bind', p, '/sbx/bin/' + t]
            argv += ['--remount-ro', '/']
            for k, v in env.items():
                argv += ['--setenv', k, v]
            argv += ['--', exe, '-I', '-B', '-u', '/sbx/main.py']
            cwd, penv = work, {'PATH': '/usr/bin:/bin'}
        else:
            env['PATH'] = ':'.join(sorted({os.path.dirname(p) for p in tools.values()}))
            env['HOME'] = env['TMPDIR'] = work
            argv, cwd, penv = [exe, '-I', '-B', '-u', code], work, env
        if cg:
            mech.append('cgroup')
        def limits():
            os.setpgid(0, 0)
            for d in cg:
                with open(os.path.join(d, 'cgroup.procs'), 'w') as f:
                    f.write('0')
            cpu = max(1, int(caps['cpu_time'] / 1e9))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            resource.setrlimit(resource.RLIMIT_AS, (caps['memory_bytes'], caps['memory_bytes']))
            resource.setrlimit(resource.RLIMIT_FSIZE, (caps['file_size_bytes'], caps['file_size_bytes']))
            resource.setrlimit(resource.RLIMIT_NPROC, (caps['processes'], caps['processes']))
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        start = time.time()
        p = subprocess.Popen(argv, cwd=cwd, env=penv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limits)
        limit = caps['output_bytes']
        state = {'total': 0, 'cap': ''}
        lock = threading.Lock()
        def kill(why):
            with lock:
                if not state['cap']:
                    state['cap'] = why
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            kill_cgroup(cg)
        bufs = {}
        def reader(name, stream):
            kept, cut = bytearray(), False
            while True:
                chunk = stream.read1(65536) if hasattr(stream, 'read1') else stream.read(65536)
                if not chunk:
                    break
                room = limit - len(kept)
                if len(chunk) > room:
                    cut = True
                kept += chunk[:max(room, 0)]
                with lock:
                    state['total'] += len(chunk)
                    over = state['total'] > limit * 16
                if over:
                    kill('output')
            bufs[name] = (bytes(kept), cut)
        ts = [threading.Thread(target=reader, args=('stdout', p.stdout)), threading.Thread(target=reader, args=('stderr', p.stderr))]
        for t in ts:
            t.start()
        try:
            p.wait(timeout=caps['wall_time'] / 1e9)
        except subprocess.TimeoutExpired:
            kill('wall_time')
            p.wait()
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        kill_cgroup(cg)
        for t in ts:
            t.join()
        rc = p.returncode
        if rc < 0:
            rc = 128 - rc
        cap = state['cap']
        if not cap or cap == 'wall_time':
            cap = cgroup_hit(cg) or cap
        if not cap and rc == 128 + signal.SIGXCPU:
            cap = 'cpu_time'
        err = bufs['stderr'][0].decode('utf-8', 'replace')
        if not cap:
            if 'MemoryError' in err:
                cap = 'memory'
            elif 'File too large' in err:
                cap = 'file_size'
        files, total = {}, 0
        after = snap(work)
        for rel, st in sorted(after.items()):
            if before.get(rel) != st and total + st[0] <= 64 << 20:
                with open(os.path.join(work, rel), 'rb') as f:
                    files[rel] = [base64.b64encode(f.read()).decode(), os.lstat(os.path.join(work, rel)).st_mode & 0o777]
                total += st[0]
        out = {'stdout': base64.b64encode(bufs['stdout'][0]).decode(), 'stdout_truncated': bufs['stdout'][1],
               'stderr': base64.b64encode(bufs['stderr'][0]).decode(), 'stderr_truncated': bufs['stderr'][1],
               'exit_code': rc, 'cap_hit': cap, 'duration_ns': int((time.time() - start) * 1e9), 'files': files, 'mechanisms': mech}
        sys.stdout.write(json.dumps(out))
    finally:
        kill_cgroup(cg)
        for d in cg:
            for _ in range(20):
                try:
                    os.rmdir(d)
                    break
                except OSError:
                    time.sleep(0.01)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(aux, ignore_errors=True)

def snap(root):
    out = {}
    for dp, dns, fns in os.walk(root):
        for fn in fns:
            p = os.path.join(dp, fn)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if os.path.isfile(p) and not os.path.islink(p):
                out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out

def make_cgroup(caps):
    name = 'agentry-sandbox-ssh/%d-%d' % (os.getpid(), int(time.time() * 1e6))
    dirs = []
    try:
        if os.path.exists('/sys/fs/cgroup/cgroup.controllers'):
            return []  # v2 delegation is the host's business; rlimits only
        for ctl, files in (('pids', {'pids.max': str(caps['processes'])}), ('memory', {'memory.limit_in_bytes': str(caps['memory_bytes'])})):
            d = os.path.join('/sys/fs/cgroup', ctl, name)
            os.makedirs(d)
            dirs.append(d)
            for k, v in files.items():
                with open(os.path.join(d, k), 'w') as f:
                    f.write(v)
        return dirs
    except OSError:
        for d in dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass
        return []

def kill_cgroup(dirs):
    if not dirs:
        return
    for _ in range(50):
        try:
            pids = [int(x) for x in open(os.path.join(dirs[0], 'cgroup.procs')).read().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)

def cgroup_hit(dirs):
    if not dirs:
        return ''
    try:
        for line in open(os.path.join(dirs[0], 'pids.events')):
            k, v = line.split()
            if k == 'max' and int(v) > 0:
                return 'processes'
        if open(os.path.join(dirs[1], 'memory.failcnt')).read().strip() != '0':
            return 'memory'
    except (OSError, ValueError, IndexError):
        pass
    return ''

main()
