/**
 * The embedded training corpus: short original paragraphs about the systems tpukit mirrors, so
 * the example needs no download. Each paragraph is one document; packing fits several per row.
 */
export const CORPUS: readonly string[] = [
  'A tensor processing unit multiplies matrices in a grid of multiply-accumulate cells. Operands flow in from two edges, partial sums flow down, and results leave the bottom row.',
  'The matrix unit takes bfloat16 operands and keeps float32 accumulators, so a long dot product loses little precision even though each input has only eight bits of mantissa.',
  'A compiler fuses chains of elementwise operations into one kernel, so the data is read once from memory and written once, instead of once per operation.',
  'An input pipeline must be deterministic: after a restart it resumes on exactly the next example, with the same shuffle order and the same random augmentations.',
  'A checkpoint is written into a temporary directory and renamed into place only when it is complete, so a crash never leaves a half written step behind.',
  'Sharding splits an array across devices along named mesh axes; a collective such as an all-reduce sums the partial results that each device computed.',
  'Packing places several short documents in one row of fixed length; segment ids keep attention from crossing document boundaries and positions restart at zero.',
  'Model flops utilization compares the useful arithmetic of a training step with the peak the hardware could deliver in the same time.',
  'Gradients come from tracing the loss into a program of primitives and running it backwards, each primitive contributing its own transpose rule.',
  'Rematerialization trades compute for memory: activations are recomputed in the backward pass instead of being stored during the forward pass.',
  'A learning rate warmup lets the optimizer settle before large steps are taken, and a decay schedule lowers the rate as training converges.',
  'Random numbers on accelerators come from counter based generators: a key and a counter hashed through rounds of addition, rotation and exclusive or.',
];
