/* placeholder until the model builder lands */
int main(void) { return 0; }
