import { ConfigError, NotLeaderError, StateError } from '../core/errors.js';
import { optionalEnum, requireOptions, requireString } from '../core/validate.js';
import type { LeadershipManager } from './manager.js';
import type { DemotionInfo, TermContext } from './types.js';

/** Options of `@Leader()`: the election a method or service belongs to, and what a call does when this process does not lead. */
export interface LeaderOptions {
  /**
   * The election: the name `bindLeader` or the `tenure/inversify` module maps to a
   * LeadershipManager. Required on a class; on a method @default the class's election
   */
  election?: string;
  /**
   * A call while this process does not lead: `'skip'` resolves undefined, `'throw'` rejects with
   * NotLeaderError, `'sentinel'` resolves {@link NOT_LEADER} (tell "not the leader" from a method
   * that returned nothing: declare the method's result `Promise<T | NotLeader>`; on a method the
   * type requires it). @default 'skip' (on a method: the class's)
   */
  whenNotLeader?: 'skip' | 'throw' | 'sentinel';
}

/**
 * What a `@Leader({ whenNotLeader: 'sentinel' })` method resolves when this process does not lead:
 * `if (result === NOT_LEADER) …` (one symbol for every call, `Symbol.for('tenure.notLeader')`).
 */
export const NOT_LEADER: unique symbol = Symbol.for('tenure.notLeader') as never;
/** The type of {@link NOT_LEADER}: put it in a sentinel method's result, `Promise<Report | NotLeader>`. */
export type NotLeader = typeof NOT_LEADER;

type Method = (this: unknown, ...args: never[]) => unknown;
type AsyncMethod = (...args: never[]) => Promise<unknown>;
type Ctor = abstract new (...args: never[]) => unknown;

/** What `@Leader()` is: a class or method decorator, both for TypeScript's `experimentalDecorators` and for TC39 decorators. */
export interface LeaderDecorator {
  /** experimentalDecorators, on a class. */
  (target: Ctor): void;
  /** experimentalDecorators, on a method (an async one: the decorated method returns a Promise). */
  <M extends AsyncMethod>(target: object, key: string | symbol, descriptor: TypedPropertyDescriptor<M>): void;
  /** TC39, on a method (an async one). */
  <M extends AsyncMethod>(value: M, context: ClassMethodDecoratorContext): M;
  /** TC39, on a class. */
  <C extends Ctor>(value: C, context: ClassDecoratorContext): C | void;
}

/** A method whose result can carry NOT_LEADER (else a compile error naming the fix, on the method). */
type AllowsNotLeader<M extends AsyncMethod> = NotLeader extends Awaited<ReturnType<M>> ? unknown : { 'whenNotLeader: sentinel needs the result type to include NotLeader': never };

/** `@Leader({ whenNotLeader: 'sentinel' })`: as {@link LeaderDecorator}, and a method's result type must include {@link NotLeader}. */
export interface SentinelLeaderDecorator {
  /** experimentalDecorators, on a class. */
  (target: Ctor): void;
  /** experimentalDecorators, on a method whose result includes NotLeader. */
  <M extends AsyncMethod>(target: object, key: string | symbol, descriptor: TypedPropertyDescriptor<M> & AllowsNotLeader<M>): void;
  /** TC39, on a method whose result includes NotLeader. */
  <M extends AsyncMethod>(value: M & AllowsNotLeader<M>, context: ClassMethodDecoratorContext): M;
  /** TC39, on a class. */
  <C extends Ctor>(value: C, context: ClassDecoratorContext): C | void;
}

/** A service class's `onElected(ctx)` / `onDemoted(info)`, both optional. */
interface Hooks {
  onElected?: (ctx: TermContext) => unknown;
  onDemoted?: (info: DemotionInfo) => unknown;
}

const classes = new WeakMap<object, LeaderOptions>(); // constructor → the class's @Leader options
const methods = new WeakMap<object, Map<string | symbol, LeaderOptions>>(); // prototype → its @Leader methods
const bindings = new WeakMap<object, (election: string | undefined) => LeadershipManager | undefined>(); // service → its managers

function parse(arg: unknown): LeaderOptions {
  const o: LeaderOptions = typeof arg === 'string' ? { election: arg } : arg === undefined ? {} : (arg as LeaderOptions);
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw new ConfigError('options', "must be an election name or { election, whenNotLeader }");
  requireOptions('options', o, { election: true, whenNotLeader: true });
  if (o.election !== undefined) requireString('election', o.election, { maxLength: 256 });
  optionalEnum('whenNotLeader', o.whenNotLeader, ['skip', 'throw', 'sentinel'], 'skip');
  return Object.freeze({ election: o.election, whenNotLeader: o.whenNotLeader });
}

/** The @Leader options of a service's class (walking up its base classes). */
function classOptions(ctor: unknown): LeaderOptions | undefined {
  for (let c = ctor; typeof c === 'function'; c = Object.getPrototypeOf(c)) {
    const o = classes.get(c);
    if (o) return o;
  }
  return undefined;
}

function recordMethod(proto: object, key: string | symbol, o: LeaderOptions): void {
  let m = methods.get(proto);
  if (!m) methods.set(proto, (m = new Map()));
  m.set(key, o);
}

/** Options of {@link bindLeader}. */
export interface BindLeaderOptions {
  /**
   * The election of a `@Leader()` method that names none, on a class that names none (what the
   * `tenure/nestjs` module passes for its `'default'` election). @default none: such a method is a
   * ConfigError unless `managers` is a single manager
   */
  defaultElection?: string;
}

/**
 * Metadata other decorators put on a method (Nest's `@Cron`, `@Get`, …, through reflect-metadata)
 * stays on it when `@Leader()` wraps it: `@Leader() @Cron('…')` is then a leader-only cron job,
 * whichever decorator is written first. Only when reflect-metadata is loaded.
 */
function carryMetadata(from: object, to: object): void {
  const r = Reflect as unknown as { getOwnMetadataKeys?: (t: object) => unknown[]; getOwnMetadata?: (k: unknown, t: object) => unknown; defineMetadata?: (k: unknown, v: unknown, t: object) => void };
  if (typeof r.getOwnMetadataKeys !== 'function' || typeof r.getOwnMetadata !== 'function' || typeof r.defineMetadata !== 'function') return;
  for (const k of r.getOwnMetadataKeys(from)) r.defineMetadata(k, r.getOwnMetadata(k, from), to);
}

function wrap(original: Method, key: string | symbol, o: LeaderOptions): Method {
  const name = String(key);
  const wrapped = function leaderOnly(this: unknown, ...args: never[]): Promise<unknown> {
    const cls = classOptions((this as object | undefined)?.constructor);
    const election = o.election ?? cls?.election;
    const what = `${(this as object | undefined)?.constructor?.name ?? 'service'}.${name}`;
    const manager = this !== null && typeof this === 'object' ? bindings.get(this)?.(election) : undefined;
    if (!manager) return Promise.reject(new StateError(`${what}: not bound to a LeadershipManager for election '${election ?? '?'}' (bindLeader(service, manager) or the tenure/inversify module)`));
    if (!manager.isLeader()) {
      const mode = o.whenNotLeader ?? cls?.whenNotLeader;
      if (mode === 'throw') return Promise.reject(new NotLeaderError(`${what}: not the leader of '${election ?? manager.candidate.name}'`));
      return Promise.resolve(mode === 'sentinel' ? NOT_LEADER : undefined);
    }
    // Work of the term: the drain waits for it, its signal aborts on demotion, currentTerm() is the term.
    return manager.track(async () => original.apply(this, args));
  };
  carryMetadata(original, wrapped);
  return wrapped;
}

/**
 * Leader-only methods and leader services. On a method: the method runs only while this process
 * leads the election (else it resolves undefined; with `whenNotLeader: 'throw'` it rejects with
 * NotLeaderError, with `'sentinel'` it resolves {@link NOT_LEADER}); the call is work of the term — the drain waits for it, its
 * `currentTerm().signal` aborts on demotion — and `currentTerm()` gives `{ signal, fence, term }`
 * anywhere below it. The decorated method always returns a Promise. On a class
 * (`@Leader('reports')`): the service's `onElected(ctx)` / `onDemoted(info)` methods become the
 * election's hooks and its `@Leader()` methods default to that election. Bind an instance to its
 * manager with {@link bindLeader} (the `tenure/inversify` module does it on activation).
 *
 * Works with TypeScript's `experimentalDecorators` (what inversify needs) and with TC39 decorators.
 */
export function Leader(options: LeaderOptions & { whenNotLeader: 'sentinel' }): SentinelLeaderDecorator;
export function Leader(options?: string | LeaderOptions): LeaderDecorator;
export function Leader(options?: string | LeaderOptions): LeaderDecorator | SentinelLeaderDecorator {
  const o = parse(options);
  const decorate = (target: unknown, key?: unknown, descriptor?: unknown): unknown => {
    if (key !== null && typeof key === 'object' && 'kind' in key) {
      // TC39: (value, context)
      const ctx = key as ClassMethodDecoratorContext | ClassDecoratorContext;
      if (ctx.kind === 'class') return void decorateClass(target as Ctor);
      if (ctx.kind !== 'method' || typeof target !== 'function') throw new ConfigError('target', `@Leader() decorates a class or a method, not a ${ctx.kind} ('${String(ctx.name)}')`);
      const mctx = ctx as ClassMethodDecoratorContext;
      if (mctx.static) throw new ConfigError('target', `@Leader() decorates instance methods, not the static '${String(mctx.name)}'`);
      mctx.addInitializer(function (this: unknown) {
        recordMethod(Object.getPrototypeOf(this as object), mctx.name, o);
      });
      return wrap(target as Method, mctx.name, o);
    }
    if (key === undefined && typeof target === 'function') return void decorateClass(target as Ctor);
    // experimentalDecorators: (prototype, key, descriptor)
    const d = descriptor as PropertyDescriptor | undefined;
    if ((typeof key !== 'string' && typeof key !== 'symbol') || !d || typeof d !== 'object' || typeof d.value !== 'function') {
      throw new ConfigError('target', `@Leader() decorates a class or a method, not ${typeof descriptor === 'number' ? 'a parameter' : d && (d.get || d.set) ? 'an accessor' : 'a property'}${typeof key === 'string' || typeof key === 'symbol' ? ` ('${String(key)}')` : ''}`);
    }
    if (typeof target === 'function') throw new ConfigError('target', `@Leader() decorates instance methods, not the static '${String(key)}'`);
    recordMethod(target as object, key, o);
    d.value = wrap(d.value as Method, key, o);
    return d;
  };
  const decorateClass = (ctor: Ctor): void => {
    if (o.election === undefined) throw new ConfigError('election', `@Leader() on class ${ctor.name} must name its election: @Leader('reports') or @Leader({ election: 'reports' })`);
    classes.set(ctor, o);
  };
  return decorate as LeaderDecorator;
}

/**
 * Every election a service (an instance or its class) names in its class's and methods' decorators
 * (the class's first); a `@Leader()` method with no election is in `defaultElection`, else a
 * ConfigError.
 */
export function leaderElections(service: object, defaultElection?: string): string[] {
  const ctor = typeof service === 'function' ? service : service.constructor;
  const cls = classOptions(ctor);
  const out = new Set<string>(cls?.election ? [cls.election] : []);
  for (let p: object | null = typeof service === 'function' ? (service.prototype as object) : Object.getPrototypeOf(service); p; p = Object.getPrototypeOf(p)) {
    for (const [key, m] of methods.get(p) ?? []) {
      const e = m.election ?? cls?.election ?? defaultElection;
      if (e === undefined) throw new ConfigError('election', `@Leader() method ${String(key)} of ${(ctor as { name?: string } | undefined)?.name ?? 'a service'}: name its election, on the method or on the class`);
      out.add(e);
    }
  }
  return [...out];
}

/**
 * Binds a service (an instance of a class using `@Leader()`) to its LeadershipManager(s): one
 * manager for every election it names, or a record from election name to manager (a method that
 * names no election, on a class that names none, is in `options.defaultElection`). A class-level
 * service's `onElected` / `onDemoted` methods become that election's hooks (called at once for a
 * term already running). Returns a function that unbinds it: its methods then reject, no new
 * term reaches its hooks (a term it saw begin still reaches its `onDemoted`).
 */
export function bindLeader(service: object, managers: LeadershipManager | Readonly<Record<string, LeadershipManager>>, options?: BindLeaderOptions): () => void {
  if (service === null || typeof service !== 'object') throw new ConfigError('service', 'must be an instance of a class that uses @Leader()');
  const isManager = (m: unknown): m is LeadershipManager => m !== null && typeof m === 'object' && typeof (m as LeadershipManager).track === 'function' && typeof (m as LeadershipManager).onElected === 'function';
  if (!isManager(managers) && (managers === null || typeof managers !== 'object' || !Object.values(managers).every(isManager))) {
    throw new ConfigError('managers', 'must be a LeadershipManager or a record from election name to LeadershipManager');
  }
  const o = requireOptions('options', options, { defaultElection: true });
  const fallback = o.defaultElection === undefined ? undefined : requireString('defaultElection', o.defaultElection, { maxLength: 256 });
  const elections = leaderElections(service, fallback);
  if (elections.length === 0 && !isManager(managers)) throw new ConfigError('service', `${service.constructor?.name ?? 'service'} uses no @Leader() election`);
  const pick = (e: string | undefined): LeadershipManager | undefined => {
    const name = e ?? fallback;
    return isManager(managers) ? managers : name === undefined ? undefined : managers[name];
  };
  for (const e of elections) if (!pick(e)) throw new ConfigError('managers', `no LeadershipManager for election '${e}'`);
  let bound = true;
  bindings.set(service, (e) => (bound ? pick(e) : undefined));
  const hooks = service as Hooks;
  const cls = classOptions(service.constructor);
  const home = cls ? pick(cls.election) : isManager(managers) ? managers : undefined;
  // A service that saw a term's onElected sees its onDemoted, even when unbound in between (a
  // container deactivates the service before it closes the manager).
  let inTerm = false;
  const elected = (ctx: TermContext): unknown => {
    if (!bound) return undefined;
    inTerm = true;
    return typeof hooks.onElected === 'function' ? hooks.onElected(ctx) : undefined;
  };
  if (home && (typeof hooks.onElected === 'function' || typeof hooks.onDemoted === 'function')) {
    home.onElected(elected);
    home.onDemoted((info) => {
      if (!inTerm) return undefined;
      inTerm = false;
      return typeof hooks.onDemoted === 'function' ? hooks.onDemoted(info) : undefined;
    });
    const now = home.currentTerm;
    if (now) void now.track(async () => elected(now)).catch((e: unknown) => void (now.signal.aborted || home.emit('error', e)));
  }
  return () => {
    bound = false;
    bindings.delete(service);
  };
}
