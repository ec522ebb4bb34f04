/**
 * Who made a request: the tenant its key stands for, whether the key is an admin's, and an id safe to record (it
 * names the key by a hash prefix, never the key).
 */
export interface Principal {
  tenant: string;
  admin: boolean;
  id: string;
}
