import { createHash, randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, realpathSync, renameSync, rmdirSync, unlinkSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { JsonObject } from '../port/index.ts';

/**
 * What a peer may have waiting to be written to it before a message that can be dropped (a token
 * delta) is dropped for it: a peer that does not read (its event loop is stuck, it is stopped)
 * costs the sender this much memory for deltas at most.
 */
const MAX_BUFFERED_BYTES = 1 << 20;

/**
 * Messages that cannot be dropped (commit notices, the answers to barriers: a few dozen bytes
 * each) wait for a peer until this much is waiting; then the connection to it is cut, and opened
 * again (the peer finds a gap in the notices, which its barrier fills).
 */
const MAX_PENDING_BYTES = 8 << 20;

/** The longest line a member reads (a larger one ends the connection) or sends (a larger message is dropped). */
const MAX_LINE_BYTES = 1 << 20;

/**
 * A barrier counts a peer that has not answered after this long as answered: a process whose event
 * loop has been stuck for that long (or that was stopped) does not hold every other one's barriers
 * forever. As long as a reader waits for deltas (NOTICE_WAIT_MS in session/feed.ts).
 */
const BARRIER_MS = 10_000;

/**
 * How often a connection to a peer is tried when it fails before it is made for another reason
 * than a refusal (the waits between grow from 20 ms to 160 ms): a peer that died as it was being
 * reached resets the connection, and only the next try is refused.
 */
const MAX_CONNECT_ATTEMPTS = 5;

/** Unix domain socket paths are limited to 108 bytes (104 on macOS), the final NUL included. */
const MAX_SOCKET_PATH_BYTES = 103;

/** Why a directory cannot hold this bus's sockets (a file system without them, read-only, not allowed). */
const UNUSABLE = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOTSUP', 'EOPNOTSUPP', 'EINVAL']);

/** A member's socket file: `<pid, base 36>-<8 random hex digits>.sock`. */
const SOCKET_NAME = /^[0-9a-z]+-[0-9a-f]{8}\.sock$/;

/** The bus of the files that a process's members use, to remove their socket files if it exits without closing them. */
const open = new Set<LocalBus>();
let exitHooked = false;

/** A peer this member sends to: the connection it opened to the peer's socket. */
interface Peer {
  readonly name: string;
  readonly socket: Socket;
  connected: boolean;
  /** Lines for it not written yet: they are, together, once the current microtasks ran (see `write`). */
  unwritten: string;
  /** Barriers waiting for the peer's answer to ping `n`. */
  readonly waiting: Array<{ n: number; answered: () => void }>;
}

/** What waits to be sent to a peer: in the socket's buffer, and queued for the next write (a UTF-16 unit counted as a byte). */
const waiting = (peer: Peer): number => peer.socket.writableLength + peer.unwritten.length;

/**
 * A relay between the members that share one SQLite database file (SQLite's processes are on one
 * machine): each member listens on a Unix domain socket in a directory tied to the file (see
 * `directoriesFor`), finds the others there when it joins and says hello to each (so they know it
 * too), and sends them newline-delimited JSON messages, each peer on its own connection, in the
 * order sent.
 *
 * - A peer's socket that refuses connections belongs to a process that died without closing it
 *   (SIGKILL): it is removed by whoever meets it.
 * - Nothing waits for a peer: a write goes to the socket's buffer, and a message that may be
 *   dropped is dropped for a peer that has more than MAX_BUFFERED_BYTES waiting (counted in
 *   `dropped`).
 * - `barrier()` resolves once every peer has answered a ping sent after the call: each answers on
 *   the connection it sends everything else on, so what it sent before it read the ping has
 *   arrived by then.
 *
 * The directory is the user's own (mode 0700, owned by this process's user): nobody else can
 * write to a member. A directory that is not, or that cannot be made, leaves the member without
 * peers.
 */
export class LocalBus {
  /**
   * Where the members of a database file meet, in order of preference: beside the file
   * (`<file>-live/`: every process on the file can reach it, and it goes with the file's
   * directory), unless a socket's path there would be too long; then in the temporary directory,
   * named by a hash of the file's real path (also where a member goes when the file's directory
   * cannot hold sockets). Every process on the file finds the same.
   */
  static directoriesFor(file: string): string[] {
    let real: string;
    try {
      real = realpathSync(file);
    } catch {
      real = resolve(file);
    }
    // Room for a socket's name (at most 24 bytes) and a separator.
    const fits = (dir: string) => Buffer.byteLength(dir) + 25 <= MAX_SOCKET_PATH_BYTES;
    const name = `keel-live-${createHash('sha256').update(real).digest('hex').slice(0, 16)}`;
    const temporary = fits(join(tmpdir(), name)) ? join(tmpdir(), name) : join('/tmp', name);
    const beside = `${real}-live`;
    return fits(beside) ? [beside, temporary] : [temporary];
  }

  /** The directory this member is in (the first of its candidates it could listen in). */
  get dir(): string {
    return this.directories[this.at]!;
  }

  private readonly directories: readonly string[];
  private at = 0;
  /** This member's socket file's name in `dir`. */
  readonly name: string;
  /** Messages dropped for a slow peer, or too large to send. */
  dropped = 0;
  private readonly receive: (message: JsonObject) => void;
  private readonly peers = new Map<string, Peer>();
  private readonly incoming = new Set<Socket>();
  private server: Server | undefined;
  private listening = false;
  private closed = false;
  private pings = 0;
  /** Resolves once the member listens and has said hello to the peers it found (or could not join). */
  readonly joined: Promise<void>;

  /**
   * Joins the members of the first of `directories` where it can listen (see `directoriesFor`);
   * `receive` gets every message a peer sends (the bus's own aside).
   */
  constructor(directories: readonly string[], receive: (message: JsonObject) => void) {
    this.directories = directories;
    this.receive = receive;
    this.name = `${process.pid.toString(36)}-${randomBytes(4).toString('hex')}.sock`;
    this.joined = this.join();
  }

  /** This member's socket file, once it listens there. */
  get socket(): string | undefined {
    return this.listening && !this.closed ? this.path : undefined;
  }

  /** How many peers this member sends to now. */
  get peerCount(): number {
    return this.peers.size;
  }

  /**
   * Sends a message to every peer, after what was sent to it before. A `droppable` message is
   * dropped for a peer that has too much waiting already. Never waits and never throws.
   */
  send(message: JsonObject, droppable: boolean): void {
    if (this.peers.size === 0) return;
    const line = `${JSON.stringify(message)}\n`;
    // A UTF-16 code unit takes three bytes of UTF-8 at most: a short line need not be measured.
    if (line.length * 3 > MAX_LINE_BYTES && Buffer.byteLength(line) > MAX_LINE_BYTES) {
      this.dropped += this.peers.size;
      return;
    }
    for (const peer of this.peers.values()) {
      if (droppable && waiting(peer) > MAX_BUFFERED_BYTES) this.dropped++;
      else this.write(peer, line);
    }
  }

  /**
   * Resolves once every peer answered a ping sent after the call (or went away, or stayed silent
   * for BARRIER_MS): what each sent before it read the ping has been received, in order, by then.
   */
  async barrier(): Promise<void> {
    await this.joined;
    if (this.closed || this.peers.size === 0) return;
    const n = ++this.pings;
    const line = `${JSON.stringify({ t: 'ping', n })}\n`;
    await new Promise<void>((resolve) => {
      // The peers still to answer, and one more until every ping is written.
      let waiting = 1;
      const timer = setTimeout(() => {
        for (const peer of this.peers.values()) {
          const i = peer.waiting.findIndex((w) => w.n === n);
          if (i >= 0) peer.waiting.splice(i, 1);
        }
        resolve();
      }, BARRIER_MS);
      // Not unref'd: a barrier being waited for keeps the process alive until it is answered (the
      // sockets do not).
      const answered = () => {
        if (--waiting > 0) return;
        clearTimeout(timer);
        resolve();
      };
      for (const peer of this.peers.values()) {
        waiting++;
        peer.waiting.push({ n, answered });
        this.write(peer, line);
      }
      answered();
    });
  }

  /** Leaves the bus: the socket file is removed, the connections are ended, barriers resolve. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    open.delete(this);
    // First the file, so that a peer trying again finds no one (instead of a closing server).
    this.removeFiles(false);
    this.server?.close();
    for (const socket of this.incoming) socket.destroy();
    this.incoming.clear();
    for (const peer of [...this.peers.values()]) {
      // What was queued for it goes first (the notice of a commit made just before, say).
      if (peer.unwritten !== '' && !peer.socket.destroyed) peer.socket.end(peer.unwritten);
      else peer.socket.end();
      peer.unwritten = '';
      this.lost(peer);
    }
    this.removeDirectory();
  }

  private get path(): string {
    return join(this.dir, this.name);
  }

  /** Removes this member's socket file (and the one it was first bound to, if still there), and with `directory` the directory if it is empty then. */
  private removeFiles(directory: boolean): void {
    for (const file of [this.path, `${this.path}.new`]) {
      try {
        unlinkSync(file);
      } catch {
        // Not there.
      }
    }
    if (directory) this.removeDirectory();
  }

  /** The directory goes with its last member (a member joining meanwhile makes it again). */
  private removeDirectory(): void {
    try {
      rmdirSync(this.dir);
    } catch {
      // Not empty, or gone.
    }
  }

  private async join(): Promise<void> {
    if (process.platform === 'win32') return;
    let server: Server | 'unusable' | undefined = 'unusable';
    for (let i = 0; i < this.directories.length && server === 'unusable'; i++) {
      this.at = i;
      server = await this.listen();
    }
    if (server === undefined || server === 'unusable') {
      this.at = 0;
      return;
    }
    this.server = server;
    this.listening = true;
    open.add(this);
    if (!exitHooked) {
      exitHooked = true;
      process.once('exit', () => {
        for (const bus of open) bus.removeFiles(true);
      });
    }
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      names = [];
    }
    for (const name of names) if (SOCKET_NAME.test(name)) this.connect(name);
  }

  /**
   * Listens on this member's socket in the directory, made if needed. Bound under a name no member
   * looks for, then renamed: a socket file a member finds always listens already, so one that
   * refuses connections is a dead member's. `unusable`: the directory cannot be this bus's (not
   * this user's alone, or on a file system that holds no sockets): the next candidate is tried.
   */
  private async listen(): Promise<Server | 'unusable' | undefined> {
    const bound = `${this.path}.new`;
    // A member leaving removes the directory when it is empty: one joining at that moment makes it again.
    for (let attempt = 1; attempt <= 3 && !this.closed; attempt++) {
      if (!this.usableDirectory()) return 'unusable';
      const server = createServer((socket) => this.accept(socket));
      // The bus does not keep a process alive (nor do its connections): the store's other
      // background work does not either.
      server.unref();
      const error = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
        server.once('error', resolve);
        server.listen(bound, () => resolve(undefined));
      });
      server.on('error', () => {});
      if (error) {
        server.close();
        if (error.code === 'ENOENT') continue;
        this.removeDirectory();
        return UNUSABLE.has(error.code ?? '') ? 'unusable' : undefined;
      }
      try {
        if (this.closed) throw new Error('closed');
        renameSync(bound, this.path);
        return server;
      } catch {
        server.close();
        return undefined;
      }
    }
    return undefined;
  }

  /** Makes the directory if needed; usable when it is a directory of this user's that nobody else may enter. */
  private usableDirectory(): boolean {
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      const st = lstatSync(this.dir);
      const mine = process.getuid === undefined || st.uid === process.getuid();
      return st.isDirectory() && mine && (st.mode & 0o077) === 0;
    } catch {
      return false;
    }
  }

  /**
   * Opens this member's connection to a peer (once), saying hello first. `attempt` counts the
   * tries of a connection that failed before it was made for another reason than a refusal.
   */
  private connect(name: string, attempt = 1): void {
    if (this.closed || !this.listening || name === this.name || this.peers.has(name)) return;
    const socket = createConnection(join(this.dir, name));
    socket.unref();
    const peer: Peer = { name, socket, connected: false, unwritten: '', waiting: [] };
    this.peers.set(name, peer);
    let failure: string | undefined;
    socket.on('connect', () => (peer.connected = true));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      failure = e.code;
      // Nobody listens on it: its member died without closing it.
      if (e.code === 'ECONNREFUSED') this.removeStale(name);
    });
    socket.on('close', () => {
      const wasConnected = peer.connected;
      this.lost(peer);
      if (this.closed) return;
      // A peer that goes away closes its socket file first; one still there belongs to a member
      // that died (or a connection that broke): trying again tells which.
      if (wasConnected) setImmediate(() => this.connect(name));
      // Not made, and neither refused nor gone: reset while it waited to be accepted (its member
      // died then), or the backlog was full. Trying again tells which.
      else if (failure !== 'ECONNREFUSED' && failure !== 'ENOENT' && attempt < MAX_CONNECT_ATTEMPTS)
        setTimeout(() => this.connect(name, attempt + 1), 10 * 2 ** attempt).unref();
    });
    // Whatever the peer sends is read on the connection it opens to this member.
    socket.resume();
    this.write(peer, `${JSON.stringify({ t: 'hello', from: this.name })}\n`);
  }

  private removeStale(name: string): void {
    try {
      unlinkSync(join(this.dir, name));
    } catch {
      // Removed by another member already.
    }
  }

  /** A peer's connection ended: barriers stop waiting for it. */
  private lost(peer: Peer): void {
    if (this.peers.get(peer.name) === peer) this.peers.delete(peer.name);
    for (const w of peer.waiting.splice(0)) w.answered();
  }

  private writeScheduled = false;

  /**
   * Queues a line for a peer. The lines of a burst of work (a worker's steps run in one stretch of
   * microtasks) go out in one write per peer once it ends, in the order queued: a write to a
   * socket costs ~10 µs of CPU with the peer's wake-up, more than the rest of a line's way.
   */
  private write(peer: Peer, line: string): void {
    if (peer.socket.destroyed) return;
    if (waiting(peer) > MAX_PENDING_BYTES) {
      this.dropped++;
      peer.unwritten = '';
      peer.socket.destroy();
      return;
    }
    peer.unwritten += line;
    if (this.writeScheduled) return;
    this.writeScheduled = true;
    process.nextTick(() => this.writeAll());
  }

  private writeAll(): void {
    this.writeScheduled = false;
    for (const peer of this.peers.values()) {
      if (peer.unwritten === '') continue;
      const data = peer.unwritten;
      peer.unwritten = '';
      if (!peer.socket.destroyed) peer.socket.write(data);
    }
  }

  /** A connection a peer opened: it says who it is, then sends its messages. */
  private accept(socket: Socket): void {
    if (this.closed) {
      socket.destroy();
      return;
    }
    socket.unref();
    this.incoming.add(socket);
    let from: string | undefined;
    let buffered = '';
    socket.setEncoding('utf8');
    socket.on('error', () => {});
    socket.on('close', () => this.incoming.delete(socket));
    const line = (text: string) => {
      let m: JsonObject;
      try {
        m = JSON.parse(text) as JsonObject;
      } catch {
        return;
      }
      if (m === null || typeof m !== 'object') return;
      if (m.t === 'hello') {
        if (typeof m.from !== 'string' || !SOCKET_NAME.test(m.from)) return void socket.destroy();
        from = m.from;
        // It knows this member now: this member sends to it too.
        this.connect(from);
      } else if (m.t === 'ping') {
        if (from === undefined || typeof m.n !== 'number') return;
        this.connect(from);
        const peer = this.peers.get(from);
        if (peer) this.write(peer, `${JSON.stringify({ t: 'pong', n: m.n })}\n`);
      } else if (m.t === 'pong') {
        const peer = from !== undefined ? this.peers.get(from) : undefined;
        if (!peer || typeof m.n !== 'number') return;
        // Answers come in the order of the pings: every barrier up to this one is answered.
        while (peer.waiting.length > 0 && peer.waiting[0]!.n <= m.n) peer.waiting.shift()!.answered();
      } else if (from !== undefined) this.receive(m);
    };
    socket.on('data', (chunk: string) => {
      let start = 0;
      for (let end = chunk.indexOf('\n'); end >= 0; end = chunk.indexOf('\n', start)) {
        const text = buffered + chunk.slice(start, end);
        buffered = '';
        start = end + 1;
        if (this.closed) return;
        line(text);
      }
      buffered += chunk.slice(start);
      if (buffered.length > MAX_LINE_BYTES) socket.destroy();
    });
  }
}
