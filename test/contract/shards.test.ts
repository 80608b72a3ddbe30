import { shardsContract } from './shards.js';
import { fourStores } from './stores.js';

/** The ShardManager contract over the four stores, one real server each for the whole file. */
for (const [kind, backend] of Object.entries(fourStores())) shardsContract(kind, backend);
