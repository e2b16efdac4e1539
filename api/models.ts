import { z } from "zod";

/**
 * `GET /v1/models` as the OpenAI API answers it, so that the OpenAI
 * clients' `models.list()` and `models.retrieve()` work: the models an API
 * key may call on `/v1/responses`.
 */
export const modelObjectSchema = z
  .object({
    id: z.string().describe("The `model` value to send"),
    object: z.literal("model"),
    created: z.number().int().describe("When its InferenceModel was created, in Unix seconds"),
    owned_by: z.string().describe("The namespace of its InferenceModel"),
  })
  .describe("Model");
export type ModelObject = z.infer<typeof modelObjectSchema>;

export const modelListSchema = z
  .object({ object: z.literal("list"), data: z.array(modelObjectSchema) })
  .describe("ModelList");

export const modelIdParamSchema = z.string().describe("A model id, as `model` takes it");
