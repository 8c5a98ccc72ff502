// E2B's JavaScript SDK, unchanged, against `wasbox serve` (run by tests/all/e2b.rs with
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set). Prints `ok <name>` or `FAIL <name>`;
// the exit status is the number of failures.
import { Sandbox, CommandExitError } from 'e2b'

const failures = []
async function check(name, f) {
  const t0 = Date.now()
  try {
    await f()
    console.log(`ok ${name} (${((Date.now() - t0) / 1000).toFixed(2)}s)`)
  } catch (e) {
    failures.push(name)
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`)
  }
}
function eq(got, want, what = '') {
  const g = JSON.stringify(got)
  const w = JSON.stringify(want)
  if (g !== w) throw new Error(`${what}: got ${g}, want ${w}`)
}

const sbx = await Sandbox.create({ timeoutMs: 120_000, metadata: { suite: 'wasbox-js' } })

await check('run', async () => {
  const r = await sbx.commands.run('echo hello; echo oops >&2; pwd')
  eq(r.exitCode, 0, 'exit code')
  eq(r.stdout, 'hello\n/home/user\n', 'stdout')
  eq(r.stderr, 'oops\n', 'stderr')
})

await check('run_streaming', async () => {
  const seen = []
  await sbx.commands.run('for i in 1 2 3; do echo line$i; done', { onStdout: (d) => seen.push(d) })
  eq(seen.join(''), 'line1\nline2\nline3\n')
})

await check('run_fails', async () => {
  try {
    await sbx.commands.run('echo bad >&2; exit 4')
    throw new Error('no CommandExitError')
  } catch (e) {
    if (!(e instanceof CommandExitError)) throw e
    eq(e.exitCode, 4, 'exit code')
    eq(e.stderr, 'bad\n', 'stderr')
  }
})

await check('background_and_kill', async () => {
  const h = await sbx.commands.run('sleep 0.2; echo bg', { background: true })
  const r = await h.wait()
  eq(r.stdout, 'bg\n')
  const k = await sbx.commands.run('sleep 30', { background: true })
  await new Promise((r) => setTimeout(r, 100))
  eq(await k.kill(), true, 'kill')
  try {
    await k.wait()
    throw new Error('a killed command ended well')
  } catch (e) {
    if (!(e instanceof CommandExitError)) throw e
  }
})

await check('stdin', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'via stdin\n')
  await sbx.commands.closeStdin(h.pid)
  eq((await h.wait()).stdout, 'via stdin\n')
})

await check('files', async () => {
  await sbx.files.write('/home/user/js/a.txt', 'alpha')
  eq(await sbx.files.read('/home/user/js/a.txt'), 'alpha')
  eq((await sbx.files.list('/home/user/js')).map((e) => e.name), ['a.txt'])
  eq(await sbx.files.exists('/home/user/js/a.txt'), true)
  eq(await sbx.files.exists('/home/user/js/none'), false)
  eq(await sbx.files.makeDir('/home/user/js/d'), true)
  await sbx.files.rename('/home/user/js/a.txt', '/home/user/js/d/b.txt')
  eq(await sbx.files.read('/home/user/js/d/b.txt'), 'alpha')
  await sbx.files.remove('/home/user/js/d')
  eq(await sbx.files.exists('/home/user/js/d'), false)
})

await check('watch', async () => {
  await sbx.files.makeDir('/home/user/jw')
  const events = []
  const handle = await sbx.files.watchDir('/home/user/jw', (e) => events.push(e))
  await sbx.files.write('/home/user/jw/f.txt', 'x')
  const deadline = Date.now() + 5000
  while (Date.now() < deadline && !events.some((e) => e.name === 'f.txt')) {
    await new Promise((r) => setTimeout(r, 50))
  }
  await handle.stop()
  if (!events.some((e) => e.name === 'f.txt')) throw new Error(`events: ${JSON.stringify(events)}`)
})

await check('pty', async () => {
  let out = ''
  const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (out += new TextDecoder().decode(d)) })
  await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo js-$((6*7))\n'))
  const deadline = Date.now() + 10000
  while (Date.now() < deadline && !out.includes('js-42')) {
    await new Promise((r) => setTimeout(r, 50))
  }
  if (!out.includes('js-42')) throw new Error(`pty output: ${JSON.stringify(out)}`)
  await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
  await sbx.pty.kill(term.pid)
})

await check('connect_and_info', async () => {
  const again = await Sandbox.connect(sbx.sandboxId)
  eq((await again.commands.run('echo $HOME')).stdout, '/home/user\n')
  const info = await sbx.getInfo()
  eq(info.sandboxId, sbx.sandboxId)
  eq(info.metadata, { suite: 'wasbox-js' })
})

await check('kill', async () => {
  await sbx.kill()
  eq(await sbx.isRunning(), false)
})

console.log(failures.length ? `${failures.length} failed: ${failures}` : 'all passed')
process.exit(failures.length)
