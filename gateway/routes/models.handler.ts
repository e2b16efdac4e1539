import type { FastifyRequest } from "fastify";
import type { ModelObject } from "../../api/models.js";
import { GatewayErrors } from "../errors.js";
import type { ModelRegistry, RoutableModel } from "../registry/registry.js";

/** `GET /v1/models` and `GET /v1/models/{model}`: the registry's models of the API-key route. */
export function modelHandlers(registry: ModelRegistry) {
  const served = (model: RoutableModel | undefined): model is RoutableModel =>
    model !== undefined && model.routes.has("api-key");
  const objectOf = (model: RoutableModel): ModelObject => ({
    id: model.id,
    object: "model",
    created: model.created,
    owned_by: model.key.slice(0, model.key.indexOf("/")),
  });
  return {
    list: () => ({
      object: "list" as const,
      data: registry
        .list()
        .filter(served)
        .map(objectOf)
        .sort((a, b) => a.id.localeCompare(b.id)),
    }),
    retrieve: (request: FastifyRequest) => {
      const { model: id } = request.params as { model: string };
      const model = registry.resolve(id);
      if (!served(model)) throw GatewayErrors.modelNotFoundById(id);
      return objectOf(model);
    },
  };
}
