import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";

/**
 * A hook whose work is asynchronous on some routes only (the payment
 * route's, a caller with token limits), in Fastify's callback form: where
 * `applies` says no, it hands on at once, instead of as an `async` hook
 * that returns at once and still costs every request a promise and a
 * microtask hop through Fastify's hook runner.
 */
export function onlyWhere(
  applies: (request: FastifyRequest) => boolean,
  work: (request: FastifyRequest, reply: FastifyReply) => Promise<void>,
): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  return (request, reply, done) => {
    if (!applies(request)) return done();
    work(request, reply).then(
      () => done(),
      (error: unknown) => done(error as Error),
    );
  };
}
