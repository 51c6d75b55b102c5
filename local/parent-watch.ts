import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * `npm run dev` runs as npm → sh → node: a SIGKILL to npm (or npm dying) cannot be forwarded, and
 * the node process would keep serving with no one to stop it. The process therefore watches the
 * processes above it up to npm (the parent, and the parent's parent when `npm_lifecycle_event`
 * says npm started it) and calls `onGone` once one of them is gone.
 */
export function watchParents(onGone: () => void, everyMs = 1000): () => void {
  const watched = [process.ppid];
  if (process.env.npm_lifecycle_event) {
    const grand = parentOf(process.ppid);
    if (grand !== undefined && grand > 1) watched.push(grand);
  }
  const timer = setInterval(() => {
    if (process.ppid !== watched[0] || watched.some((pid) => !alive(pid))) {
      clearInterval(timer);
      onGone();
    }
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A process's parent: /proc where there is one (Linux), else `ps`. */
function parentOf(pid: number): number | undefined {
  try {
    // /proc/<pid>/stat: "pid (comm) state ppid …"; comm may hold spaces, so read after its ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    try {
      return Number(execFileSync('ps', ['-o', 'ppid=', '-p', String(pid)], { encoding: 'utf8' }).trim());
    } catch {
      return undefined;
    }
  }
}
