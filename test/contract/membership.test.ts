import { membershipContract } from './membership.js';
import { fourStores } from './stores.js';

/** The Membership contract over the four stores, one real server each for the whole file. */
for (const [kind, backend] of Object.entries(fourStores())) membershipContract(kind, backend);
